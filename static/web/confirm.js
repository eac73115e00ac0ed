// Buttons and links with data-confirm ask before they act (no inline handlers: the CSP forbids them).
document.addEventListener("click", (event) => {
  const target = event.target.closest("[data-confirm]");
  if (target && !window.confirm(target.dataset.confirm)) event.preventDefault();
});
