// rscoord console: lifecycle actions on the selected group (WRITE role):
// reset its offsets and delete its stream. A reset is always a dry run
// first: the page shows each shard's last delivered id before and after,
// and only an explicit confirmation executes it. Deleting a stream cannot
// be undone, so its confirmation wants the stream's name typed.
"use strict";

// The dry run on show: the group it was made for and the request it
// sent, which an execution sends again with execute set.
const reset = { key: null, body: null };

const targetWords = (body) => ({
  EARLIEST: "the earliest entry",
  LATEST: "the latest entry",
  TIME: "time " + body.time,
  ID: "entry id " + body.id,
})[body.to];

const shardWords = (body) => (body.shards ? "shard " + body.shards[0] : "every shard");

// resetRequest reads the form into the API's request, or throws what is
// wrong with it.
function resetRequest() {
  const body = { requestedBy: state.user, to: $("reset-to").value };
  const at = $("reset-at").value.trim();
  if (body.to === "TIME") {
    const t = Date.parse(at);
    if (Number.isNaN(t)) throw new Error("“" + at + "” is not a time (e.g. 2026-01-02T15:04:05Z)");
    body.time = new Date(t).toISOString();
  } else if (body.to === "ID") {
    if (!/^\d+-\d+$/.test(at)) throw new Error("“" + at + "” is not an entry id (ms-seq, e.g. 1700000000000-0)");
    body.id = at;
  }
  const shard = $("reset-shard").value.trim();
  if (shard !== "") body.shards = [parseInt(shard, 10)];
  // Sent only when ticked: a server that does not know the field ignores
  // it, and the refusal then says so.
  if ($("reset-force").checked) body.force = true;
  return body;
}

// discardResetPlan hides the dry run (another group was picked, the user
// signed out, or discarded it).
function discardResetPlan() {
  reset.key = null;
  reset.body = null;
  $("reset-plan").hidden = true;
  $("reset-shards").tBodies[0].replaceChildren();
  $("reset-error").textContent = "";
}

// showResetPlan draws an answer of the offsets reset API: each shard's
// last delivered id from → to, and the members that still read it.
function showResetPlan(answer) {
  const [prefix, group] = reset.key.split("/");
  const busy = answer.shards.filter((s) => (s.owners || []).length > 0).map((s) => s.shardIndex);
  $("reset-summary").textContent = (answer.executed ? "Executed: " : "Dry run, nothing changed yet: ") +
    "group " + group + " of " + prefix + " to " + targetWords(reset.body) + " on " + shardWords(reset.body) +
    (answer.executed ? "." : busy.length ? ". Members still read shards " + busy.join(", ") +
      ": executing is refused unless they stop or force is ticked." : ".");
  fill("reset-shards", answer.shards, (row, s) => {
    row.dataset.shard = s.shardIndex;
    cell(row, s.shardIndex);
    cell(row, s.streamKey);
    cell(row, s.currentLastDeliveredId || "(group missing)");
    cell(row, s.newLastDeliveredId);
    cell(row, (s.owners || []).join(", "));
  });
  $("reset-execute").hidden = answer.executed;
  $("reset-plan").hidden = false;
}

const resetPath = (key) => {
  const [prefix, group] = key.split("/");
  return "/streams/" + enc(prefix) + "/groups/" + enc(group) + "/offsets/reset";
};

// explainReset says a refused reset in plain words.
function explainReset(err, body) {
  if (err.code === "GROUP_HAS_ACTIVE_MEMBERS") {
    return (body.force ? "even with force, " : "") + "live members still read these shards, and moving the group under a " +
      "reader would land at no telling point of its reads. Stop those members (or wait for their leases to end), " +
      "or tick “force (members hand off first)”. The server said: " + err.message;
  }
  return err.message;
}

$("reset-to").addEventListener("change", () => {
  const to = $("reset-to").value;
  $("reset-at-label").hidden = to !== "TIME" && to !== "ID";
  $("reset-at").placeholder = to === "TIME" ? "2026-01-02T15:04:05Z" : "ms-seq";
});

$("reset-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  discardResetPlan();
  const key = state.selected;
  if (!key) return;
  let body;
  try {
    body = resetRequest();
    const answer = await post(resetPath(key), body);
    if (state.selected !== key) return; // another group was picked meanwhile
    reset.key = key;
    reset.body = body;
    showResetPlan(answer);
  } catch (err) {
    $("reset-error").textContent = body ? explainReset(err, body) : err.message;
  }
});

$("reset-discard").addEventListener("click", discardResetPlan);

$("reset-execute").addEventListener("click", () => {
  if (!reset.key) return;
  const key = reset.key;
  const [prefix, group] = key.split("/");
  const body = Object.assign({}, reset.body);
  delete body.force;
  if ($("reset-force").checked) body.force = true;
  ask("reset the offsets of group " + group + " of " + prefix + " to " + targetWords(body) + " on " + shardWords(body) +
    (body.force ? " (force: members hand off first)" : ""), async (why) => {
    const answer = await post(resetPath(key), Object.assign({}, body, { reason: why, execute: true }));
    if (reset.key === key) showResetPlan(answer);
    const handed = answer.handedOff || [];
    return "shards moved: " + answer.shards.length + (handed.length ? " · handed off by " + handed.join(", ") : "");
  }, true, { explain: (err) => explainReset(err, body) });
});

// explainStreamDelete says a refused stream delete in plain words.
function explainStreamDelete(err, prefix) {
  switch (err.code) {
    case "STREAM_HAS_GROUPS":
      return "stream " + prefix + " still has consumer groups. Delete them first, or tick “force (deletes its groups first)” " +
        "to delete them with the stream. The server said: " + err.message;
    case "ACTIVE_MIGRATION_EXISTS":
      return "a migration of stream " + prefix + " is under way. Complete or roll it back first, or tick force " +
        "(the migration is dropped with the stream). The server said: " + err.message;
    case "REDIS_NOT_CONFIGURED":
      return "deleting the keys needs Redis, and this coordinator runs without --redis. Untick “delete its keys”.";
    default:
      return err.message;
  }
}

$("delete-stream-button").addEventListener("click", () => {
  const [prefix] = selectedRef();
  const force = $("delete-stream-force").checked;
  const deleteKeys = $("delete-stream-keys").checked;
  ask("delete stream " + prefix + (force ? " with its groups" : "") + (deleteKeys ? " and its shard keys" : ""), async (why) => {
    const body = { requestedBy: state.user, reason: why };
    if (force) body.force = true;
    if (deleteKeys) body.deleteKeys = true;
    const answer = await post("/streams/" + enc(prefix), body, "DELETE");
    $("delete-stream-force").checked = false;
    $("delete-stream-keys").checked = false;
    return "groups deleted: " + (answer.deletedGroups.join(", ") || "none") + " · keys deleted: " + answer.deletedKeys.length;
  }, true, { typed: prefix, explain: (err) => explainStreamDelete(err, prefix) });
});
