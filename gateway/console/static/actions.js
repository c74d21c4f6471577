// rscoord console: actions (WRITE role). Each first shows what it will
// do; only the confirmation sends it. Every mutation carries requestedBy
// and a reason, and the server audits it. Pages of READ users have no
// action at all: the forms are hidden and rows get no buttons.
"use strict";

// ask shows the confirmation of summary; confirmed, send(reason) runs
// with the reason typed there (withReason), or none (forms that have a
// reason field of their own).
function ask(summary, send, withReason) {
  state.pending = send;
  $("confirm-text").textContent = summary;
  $("confirm-reason-label").hidden = !withReason;
  $("confirm-reason").value = "";
  $("confirm").hidden = false;
  $("action-result").textContent = "";
  if (withReason) $("confirm-reason").focus();
}
$("confirm-no").addEventListener("click", () => { state.pending = null; $("confirm").hidden = true; });
$("confirm-yes").addEventListener("click", async () => {
  const send = state.pending;
  state.pending = null;
  $("confirm").hidden = true;
  if (!send) return;
  try {
    await send($("confirm-reason").value.trim());
    $("action-result").className = "ok";
    $("action-result").textContent = "Done: " + $("confirm-text").textContent;
    startRefreshing();
  } catch (err) {
    $("action-result").className = "error";
    $("action-result").textContent = "Refused: " + err.message;
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
