// Buttons and links with data-confirm ask before they act (no inline handlers: the CSP forbids them).
// A plain button or link asks on click, before its form is submitted (an htmx form sends on that
// submit, so it waits too). An element that sends an htmx request itself asks through htmx:confirm,
// which htmx fires before it sends: its own click listener runs before this document-level one.
const HTMX_REQUEST = ["get", "post", "put", "patch", "delete"].map((verb) => `[hx-${verb}],[data-hx-${verb}]`).join(",");

document.addEventListener("click", (event) => {
  const target = event.target.closest("[data-confirm]");
  if (!target || target.matches(HTMX_REQUEST)) return;
  if (!window.confirm(target.dataset.confirm)) event.preventDefault();
});

document.addEventListener("htmx:confirm", (event) => {
  const element = event.detail.elt;
  if (!element.matches("[data-confirm]") || !element.matches(HTMX_REQUEST)) return;
  event.preventDefault();
  if (window.confirm(element.dataset.confirm)) event.detail.issueRequest(true);
});
