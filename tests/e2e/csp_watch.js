// Injected into every page the browser tests open: each Content-Security-Policy violation is logged
// as a console error that tests/e2e/conftest.py collects and fails the test on.
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(
    `CSP violation: ${event.violatedDirective} blocked ${event.blockedURI || "inline code"}` +
      ` at ${event.sourceFile || document.location.href}:${event.lineNumber}`,
  );
});
