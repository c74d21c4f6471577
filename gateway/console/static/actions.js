// rscoord console: actions (WRITE role). Each first shows what it will
// do; only the confirmation sends it. Every mutation carries requestedBy
// and a reason, and the server audits it. Pages of READ users have no
// action at all: the forms are hidden and rows get no buttons.
"use strict";

// ask shows the confirmation of summary; confirmed, send(reason) runs
// with the reason typed there (withReason), or none (forms that have a
// reason field of their own). opts.typed is a name the user must type
// before Confirm is enabled (for what cannot be undone); opts.explain
// turns a refusal into plain words. What send answers as a string is
// added to the result line.
function ask(summary, send, withReason, opts = {}) {
  state.pending = { send, explain: opts.explain || ((err) => err.message) };
  $("confirm-text").textContent = summary;
  $("confirm-reason-label").hidden = !withReason;
  $("confirm-reason").value = "";
  const typed = opts.typed || "";
  $("confirm-typed-label").hidden = typed === "";
  $("confirm-typed-name").textContent = typed;
  $("confirm-typed").value = "";
  $("confirm-typed").dataset.want = typed;
  $("confirm-yes").disabled = typed !== "";
  $("confirm").hidden = false;
  $("action-result").textContent = "";
  if (typed) $("confirm-typed").focus();
  else if (withReason) $("confirm-reason").focus();
}
$("confirm-typed").addEventListener("input", () => {
  $("confirm-yes").disabled = $("confirm-typed").value !== $("confirm-typed").dataset.want;
});
$("confirm-no").addEventListener("click", () => { state.pending = null; $("confirm").hidden = true; });
$("confirm-yes").addEventListener("click", async () => {
  const pending = state.pending;
  state.pending = null;
  $("confirm").hidden = true;
  if (!pending) return;
  try {
    const note = await pending.send($("confirm-reason").value.trim());
    $("action-result").className = "ok";
    $("action-result").textContent = "Done: " + $("confirm-text").textContent + (typeof note === "string" && note ? " · " + note : "");
    startRefreshing();
  } catch (err) {
    $("action-result").className = "error";
    $("action-result").textContent = "Refused: " + pending.explain(err);
  }
});
const post = (path, body, method) => call(path, { method: method || "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
const selectedRef = () => (state.selected || "/").split("/");
const reason = (id) => $(id).value.trim();

$("create-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const prefix = $("create-prefix").value.trim();
  const count = parseInt($("create-shards").value, 10);
  ask("create stream " + prefix + " with " + count + " shards", () =>
    post("/streams/" + enc(prefix), { initialShardCount: count, requestedBy: state.user, reason: reason("create-reason") }));
});
$("scale-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const [prefix] = selectedRef();
  const count = parseInt($("scale-count").value, 10);
  ask("scale stream " + prefix + " to " + count + " shards", () =>
    post("/streams/" + enc(prefix) + "/scale", { targetShardCount: count, requestedBy: state.user, reason: reason("scale-reason") }));
});
$("delete-button").addEventListener("click", () => {
  const [prefix, group] = selectedRef();
  const force = $("delete-force").checked;
  ask("delete group " + group + " of " + prefix + (force ? " (force)" : ""), (why) =>
    post("/streams/" + enc(prefix) + "/groups/" + enc(group), { requestedBy: state.user, reason: why, force }, "DELETE"), true);
});

document.addEventListener("DOMContentLoaded", start);
