/**
 * The reference page's files (runs in workerd, served by edge/routes/reference.ts): a small HTML
 * page, its stylesheet, and a script that fetches the OpenAPI document and lists every operation,
 * its credential, parameters, bodies, errors and headers, then every schema. Nothing is loaded from
 * elsewhere, so the page works offline and under a `'self'`-only content security policy. The script
 * builds the page with DOM calls only (no HTML strings), so nothing in the document is ever markup.
 */

export const REFERENCE_ASSETS = { script: "/docs/reference.js", style: "/docs/reference.css" } as const;

export function referenceHtml(documentPath: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Decision service API reference</title>
<link rel="stylesheet" href="${REFERENCE_ASSETS.style}">
<script src="${REFERENCE_ASSETS.script}" defer></script>
</head>
<body data-document="${documentPath}">
<header><h1>Decision service API reference</h1><p>Generated from <a href="${documentPath}">${documentPath}</a> (OpenAPI 3.1).</p></header>
<nav id="toc" aria-label="Operations"></nav>
<main id="reference"><p>Loading the document…</p></main>
</body>
</html>
`;
}

export const REFERENCE_CSS = `
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --code: rgba(127, 127, 127, 0.12); }
body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 72rem; padding: 1rem 2rem 4rem; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid var(--line); } h3 { margin: 0; font-size: 1.05rem; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.9em; background: var(--code); border-radius: 4px; }
code { padding: 0 0.25em; } pre { padding: 0.75rem; overflow: auto; max-height: 32rem; }
nav ul { columns: 2; list-style: none; padding: 0; } nav li { margin: 0.15rem 0; }
.operation { border: 1px solid var(--line); border-radius: 6px; padding: 0.75rem 1rem; margin: 1rem 0; }
.method { display: inline-block; min-width: 4.5em; font-weight: 700; text-transform: uppercase; }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin: 0.5rem 0; } th, td { text-align: left; vertical-align: top; padding: 0.3rem 0.5rem; border-top: 1px solid var(--line); }
details { margin: 0.4rem 0; } summary { cursor: pointer; }
`;

/** Plain browser JavaScript; keep it free of backticks and dollar-brace, since it lives in this template. */
export const REFERENCE_JS = String.raw`
"use strict";
(function () {
  function h(tag, attrs) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return el;
  }
  function code(text) { return h("code", {}, String(text)); }
  function schemaLink(schema) {
    if (schema && schema.$ref) {
      var name = schema.$ref.split("/").pop();
      return h("a", { href: "#schema-" + name }, code(name));
    }
    return h("details", {}, h("summary", {}, "schema"), h("pre", {}, JSON.stringify(schema, null, 2)));
  }
  function content(body) {
    var types = Object.keys((body && body.content) || {});
    if (types.length === 0) return h("span", { "class": "muted" }, "no body");
    return h("span", {}, code(types[0]), " ", schemaLink(body.content[types[0]].schema));
  }
  function credential(op, doc) {
    if (!op.security || op.security.length === 0) return "none";
    var name = Object.keys(op.security[0])[0];
    var scheme = doc.components.securitySchemes[name] || {};
    return name + " (Bearer " + (scheme.bearerFormat || "") + ")";
  }
  function operation(path, method, op, doc) {
    var section = h("section", { "class": "operation", id: op.operationId },
      h("h3", {}, h("span", { "class": "method" }, method), code(path)),
      h("p", {}, op.summary || "", " ", h("span", { "class": "muted" }, "operationId " + op.operationId + "; credential: " + credential(op, doc))));
    if (op.parameters && op.parameters.length > 0) {
      var params = h("table", {}, h("tr", {}, h("th", {}, "Parameter"), h("th", {}, "In"), h("th", {}, "Schema"), h("th", {}, "Description")));
      op.parameters.forEach(function (p) {
        params.appendChild(h("tr", {}, h("td", {}, code(p.name), p.required ? " (required)" : ""), h("td", {}, p["in"]), h("td", {}, code(JSON.stringify(p.schema))), h("td", {}, p.description || "")));
      });
      section.appendChild(params);
    }
    if (op.requestBody) section.appendChild(h("p", {}, "Request body" + (op.requestBody.required ? "" : " (optional)") + ": ", content(op.requestBody)));
    var responses = h("table", {}, h("tr", {}, h("th", {}, "Status"), h("th", {}, "Description"), h("th", {}, "Body"), h("th", {}, "Headers")));
    Object.keys(op.responses).forEach(function (status) {
      var r = op.responses[status];
      responses.appendChild(h("tr", {}, h("td", {}, code(status)), h("td", {}, r.description || ""), h("td", {}, content(r)),
        h("td", {}, Object.keys(r.headers || {}).map(function (n) { return n; }).join(", "))));
    });
    section.appendChild(responses);
    return section;
  }
  function render(doc) {
    var main = document.getElementById("reference");
    var toc = document.getElementById("toc");
    main.textContent = "";
    main.appendChild(h("p", {}, doc.info.description || ""));
    var list = h("ul", {});
    toc.appendChild(list);
    (doc.tags || []).forEach(function (tag) {
      main.appendChild(h("h2", { id: "tag-" + tag.name }, tag.name));
      Object.keys(doc.paths).forEach(function (path) {
        Object.keys(doc.paths[path]).forEach(function (method) {
          var op = doc.paths[path][method];
          if ((op.tags || [])[0] !== tag.name) return;
          main.appendChild(operation(path, method, op, doc));
          list.appendChild(h("li", {}, h("a", { href: "#" + op.operationId }, method.toUpperCase() + " " + path)));
        });
      });
    });
    main.appendChild(h("h2", { id: "headers" }, "Response headers"));
    var headers = h("table", {});
    Object.keys(doc.components.headers || {}).forEach(function (name) {
      headers.appendChild(h("tr", {}, h("td", {}, code(name)), h("td", {}, doc.components.headers[name].description || "")));
    });
    main.appendChild(headers);
    main.appendChild(h("h2", { id: "schemas" }, "Schemas"));
    Object.keys(doc.components.schemas).forEach(function (name) {
      main.appendChild(h("details", { id: "schema-" + name }, h("summary", {}, code(name)), h("pre", {}, JSON.stringify(doc.components.schemas[name], null, 2))));
    });
    openTarget();
  }
  function openTarget() {
    if (!location.hash) return;
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) { if (target.tagName === "DETAILS") target.open = true; target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openTarget);
  fetch(document.body.getAttribute("data-document"), { headers: { accept: "application/json" } })
    .then(function (res) { if (!res.ok) throw new Error("the document answered " + res.status); return res.json(); })
    .then(render)
    .catch(function (err) { document.getElementById("reference").textContent = "Could not load the document: " + err.message; });
})();
`;
