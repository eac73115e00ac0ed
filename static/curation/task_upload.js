// Upload with a progress bar, then show the server's report page in place.
(function () {
  const form = document.getElementById("upload-form");
  const bar = document.getElementById("upload-progress");
  if (!form || !window.XMLHttpRequest) return;
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    const request = new XMLHttpRequest();
    request.open("POST", form.action || window.location.href);
    bar.hidden = false;
    request.upload.addEventListener("progress", function (progress) {
      if (progress.lengthComputable) bar.value = Math.round((100 * progress.loaded) / progress.total);
    });
    request.addEventListener("load", function () {
      document.open();
      document.write(request.responseText);
      document.close();
    });
    request.send(new FormData(form));
  });
})();
