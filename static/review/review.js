// Review queue keyboard shortcuts: j/k move, a approves, r rejects and s sends back (both need a
// comment), c comments, ? shows help, Esc closes. Keys are ignored while typing in a field.
(function () {
  const help = document.getElementById("review-help");

  function typing(target) {
    return target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
  }

  function openForm(id) {
    document.querySelectorAll(".decision-form").forEach((form) => { form.hidden = form.id !== id; });
    const form = document.getElementById(id);
    if (form) {
      form.hidden = false;
      form.querySelector("textarea").focus();
    }
  }

  function closeForms() {
    document.querySelectorAll(".decision-form").forEach((form) => { form.hidden = true; });
    if (document.activeElement) document.activeElement.blur();
  }

  function follow(id) {
    const link = document.getElementById(id);
    if (link) window.location.assign(link.href);
  }

  document.querySelectorAll("[data-open]").forEach((button) => {
    button.addEventListener("click", () => openForm(button.dataset.open));
  });
  const helpToggle = document.getElementById("help-toggle");
  if (helpToggle && help) helpToggle.addEventListener("click", () => help.showModal());

  document.querySelectorAll(".decision-form textarea, #comment-body").forEach((area) => {
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        area.form.requestSubmit();
      } else if (event.key === "Escape") {
        event.preventDefault();
        closeForms();
      }
    });
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (help && help.open && event.key !== "?") return;
    const actions = {
      j: () => follow("next-task"),
      k: () => follow("previous-task"),
      // A click, not a submit: the button's data-confirm (a too-hard or undecided task) asks first.
      a: () => { const button = document.getElementById("approve-button"); if (button) button.click(); },
      r: () => openForm("reject-form"),
      s: () => openForm("send-back-form"),
      c: () => { const body = document.getElementById("comment-body"); if (body) { body.scrollIntoView({ block: "center" }); body.focus(); } },
      "?": () => { if (help) (help.open ? help.close() : help.showModal()); },
      Escape: closeForms,
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });
})();
