// Markdown (marked) with LaTeX ($…$, $$…$$, \(…\), \[…\]) by KaTeX, both vendored in static/vendor.
// Authors' raw HTML is shown as text (marked's html renderer escapes it; marked escapes text and code
// itself, so nothing is escaped twice: `>>>` and quotes in code read as written), formulas are put back
// escaped, and marked's output goes through DOMPurify (vendored) allowing only http(s), mailto and
// in-page links, so task text can never inject markup or script into the page.
// Elements marked data-markdown are rendered on load; window.passbandRender renders on demand.
(function () {
  const DELIMITERS = [
    { left: "$$", right: "$$", display: true },
    { left: "\\[", right: "\\]", display: true },
    { left: "$", right: "$", display: false },
    { left: "\\(", right: "\\)", display: false },
  ];

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }

  const SANITIZE = { ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|#)/i, FORBID_TAGS: ["style", "form", "input"] };

  // Math is set aside before Markdown runs, so that `_` and `*` inside formulas stay LaTeX.
  const MATH = /\$\$[\s\S]+?\$\$|\\\[[\s\S]+?\\\]|\\\([\s\S]+?\\\)|\$[^$\n]+?\$/g;

  marked.use({ renderer: { html: (token) => escapeHtml(typeof token === "string" ? token : token.text) } });

  window.passbandRender = function (element, markdown) {
    const formulas = [];
    const text = markdown.replace(MATH, (formula) => {
      formulas.push(formula);
      return "%%MATH" + (formulas.length - 1) + "%%";
    });
    const html = DOMPurify.sanitize(marked.parse(text, { breaks: true }), SANITIZE);
    element.innerHTML = html.replace(/%%MATH(\d+)%%/g, (_, index) => escapeHtml(formulas[Number(index)]));
    renderMathInElement(element, { delimiters: DELIMITERS, throwOnError: false });
  };

  function start() {
    document.querySelectorAll("[data-markdown]").forEach((element) => {
      window.passbandRender(element, element.textContent);
      element.classList.remove("pre");
      element.classList.add("markdown", "rendered");
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
