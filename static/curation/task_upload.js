// Upload with a progress bar, then show the server's report page in place (or the import's or mapping's page).
(function () {
  const form = document.getElementById("upload-form");
  const bar = document.getElementById("upload-progress");
  if (!form || !window.XMLHttpRequest) return;
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const request = new XMLHttpRequest();
    // getAttribute, not form.action: the buttons named "action" shadow that property.
    request.open("POST", form.getAttribute("action") || window.location.href);
    bar.hidden = false;
    request.upload.addEventListener("progress", function (progress) {
      if (progress.lengthComputable) bar.value = Math.round((100 * progress.loaded) / progress.total);
    });
    request.addEventListener("load", function () {
      // A large file was queued: the server redirected to the import's own page.
      if (request.status === 200 && request.responseURL && request.responseURL !== window.location.href) {
        window.location.assign(request.responseURL);
        return;
      }
      document.open();
      document.write(request.responseText);
      document.close();
    });
    // The submitter's name and value say which button was pressed: Upload or Map columns.
    request.send(new FormData(form, event.submitter));
  });
})();
