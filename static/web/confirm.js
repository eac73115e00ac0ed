// Buttons and links with data-confirm ask before they act (no inline handlers: the CSP forbids them).
// A plain button or link asks on click, before its form is submitted (an htmx form sends on that
// submit, so it waits too). An element that sends an htmx request itself asks through htmx:confirm,
// which htmx fires before it sends: its own click listener runs before this document-level one.
// An upload's result page is written over the form's page (document.write), which runs this script a
// second time in the same window: inside a function nothing is declared twice, and the listeners of a
// first run, if the browser kept them, are taken off so that nothing asks twice.
(function () {
  const HTMX_REQUEST = ["get", "post", "put", "patch", "delete"].map((verb) => `[hx-${verb}],[data-hx-${verb}]`).join(",");

  const handlers = {
    click: (event) => {
      const target = event.target.closest("[data-confirm]");
      if (!target || target.matches(HTMX_REQUEST)) return;
      if (!window.confirm(target.dataset.confirm)) event.preventDefault();
    },
    "htmx:confirm": (event) => {
      const element = event.detail.elt;
      if (!element.matches("[data-confirm]") || !element.matches(HTMX_REQUEST)) return;
      event.preventDefault();
      if (window.confirm(element.dataset.confirm)) event.detail.issueRequest(true);
    },
  };
  for (const [name, handler] of Object.entries(window.passbandConfirmHandlers || {})) {
    document.removeEventListener(name, handler);
  }
  window.passbandConfirmHandlers = handlers;
  for (const [name, handler] of Object.entries(handlers)) document.addEventListener(name, handler);
})();
