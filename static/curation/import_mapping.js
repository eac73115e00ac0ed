// Choosing a saved mapping applies it at once (the Use button stays for browsers without scripts).
document.addEventListener("change", (event) => {
  const select = event.target.closest("select[data-apply-on-change]");
  if (select && select.value) select.form.requestSubmit();
});
