// Renders the coordinator's own OpenAPI document. Nothing is fetched from
// another origin: the validator badge is off.
"use strict";
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/v3/api-docs",
    dom_id: "#explorer",
    deepLinking: true,
    validatorUrl: null,
    tryItOutEnabled: true,
    operationsSorter: "method",
    tagsSorter: "alpha",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
