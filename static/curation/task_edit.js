// Live preview of the task editor, rendered by static/curation/markdown.js as the author types.
(function () {
  function promptMarkdown(format, text) {
    if (format !== "messages") return text;
    try {
      const messages = JSON.parse(text);
      return messages.map((m) => "**" + m.role + "**\n\n" + m.content).join("\n\n---\n\n");
    } catch (error) {
      return "*Not valid JSON yet: " + error.message + "*";
    }
  }

  function start() {
    const prompt = document.getElementById("prompt");
    if (!prompt) return;
    const format = document.getElementById("prompt-format");
    const answer = document.getElementById("answer");
    const preview = document.getElementById("preview");
    const answerPreview = document.getElementById("answer-preview");
    let timer = null;
    const update = () => {
      window.passbandRender(preview, promptMarkdown(format.value, prompt.value));
      window.passbandRender(answerPreview, answer.value);
      preview.dataset.rendered = "true";
    };
    const soon = () => { clearTimeout(timer); timer = setTimeout(update, 120); };
    [prompt, answer, format].forEach((field) => field.addEventListener("input", soon));
    format.addEventListener("change", update);
    update();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
