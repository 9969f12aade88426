// The bus's AsyncAPI document as a page: one table of channels (stream, writer or reader,
// group, message) and each message's schema, drawn from /asyncapi.json with no library.

const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  node.append(...children);
  return node;
};

const refName = (ref) => (ref || "").split("/").pop();

function channelsTable(doc) {
  const rows = Object.entries(doc.channels).map(([name, channel]) => {
    const redis = (channel.bindings || {}).redis || {};
    const operation = doc.operations[name] || {};
    const message = Object.values(channel.messages || {})[0] || {};
    const payload = ((doc.components.messages || {})[refName(message.$ref)] || {}).payload || {};
    const schema = refName(payload.$ref);
    return el(
      "tr", {},
      el("td", {}, el("code", {}, channel.address)),
      el("td", {}, name),
      el("td", {}, operation.action === "send" ? "writes" : "reads"),
      el("td", {}, redis.groupName || (redis.method === "xread" ? "(none)" : "")),
      el("td", {}, schema ? el("a", { href: `#schema-${schema}` }, schema) : ""),
      el("td", {}, channel.description || ""),
    );
  });
  const head = ["stream", "who", "does", "group", "message", "about"].map((h) => el("th", {}, h));
  const table = el("table", { class: "data" }, el("thead", {}, el("tr", {}, ...head)), el("tbody", {}, ...rows));
  return el("div", { class: "wide" }, table);
}

function schemaSection(name, schema) {
  const required = new Set(schema.required || []);
  const rows = Object.entries(schema.properties || {}).map(([field, spec]) =>
    el(
      "tr", {},
      el("td", {}, el("code", {}, field)),
      el("td", {}, spec.type || (spec.anyOf || []).map((s) => s.type || refName(s.$ref)).join(" | ")),
      el("td", {}, required.has(field) ? "required" : ""),
      el("td", {}, spec.description || ""),
    ));
  return el(
    "article", { id: `schema-${name}` },
    el("h3", {}, name),
    el("p", {}, schema.description || ""),
    el("div", { class: "wide" }, el("table", { class: "data" }, el("tbody", {}, ...rows))),
  );
}

async function main() {
  try {
    const answer = await fetch("/asyncapi.json");
    if (!answer.ok) throw new Error(`GET /asyncapi.json: ${answer.status}`);
    const doc = await answer.json();
    document.getElementById("title").textContent = `${doc.info.title} (AsyncAPI ${doc.asyncapi})`;
    document.getElementById("channels").append(el("h2", {}, "Channels"), channelsTable(doc));
    const schemas = Object.entries(doc.components.schemas || {});
    document.getElementById("schemas").append(
      el("h2", {}, "Messages"), ...schemas.map(([name, s]) => schemaSection(name, s)));
  } catch (error) {
    document.getElementById("error").textContent = String(error);
  }
}

main();
