// rscoord console: plain JavaScript over the /coord/v1 API. Every value
// from the server is put in the page with textContent, never as HTML.
"use strict";

const api = "/coord/v1";
const refreshMs = 2000;
// A request that has no answer by then fails: a coordinator that hangs
// (paused, its host gone, a proxy holding the connection) must read as an
// error, not as the last answers it gave.
const requestTimeoutMs = 10000;
const state = { token: sessionStorage.getItem("rscoord.token"), selected: null, loop: null, updatedAt: "", user: "", canWrite: false, pending: null, browse: null };

const $ = (id) => document.getElementById(id);

async function call(path, options = {}) {
  // X-Requested-With: a 401 then comes without a Basic challenge, which
  // would make the browser open its own password dialog.
  const headers = Object.assign({ "Accept": "application/json", "X-Requested-With": "rscoord-console" }, options.headers || {});
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), requestTimeoutMs);
  try {
    const resp = await fetch(api + path, Object.assign({}, options, { headers, signal: abort.signal }));
    const body = await resp.json().catch(() => ({}));
    if (abort.signal.aborted) throw new Error("timed out");
    if (!resp.ok) {
      const err = new Error(body.message || resp.statusText);
      err.status = resp.status;
      throw err;
    }
    return body;
  } catch (err) {
    if (abort.signal.aborted) throw new Error("no answer within " + requestTimeoutMs / 1000 + " s");
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

function show(signedIn) {
  $("signin").hidden = signedIn;
  $("app").hidden = !signedIn;
  $("signout").hidden = !signedIn || !state.token;
}

async function start() {
  try {
    const session = await call("/monitoring/session");
    $("who").textContent = session.authenticated ? session.username + " (" + session.roles.join(", ") + ")" : "authentication off";
    state.user = session.username;
    state.canWrite = session.roles.includes("WRITE") || session.roles.includes("ADMIN");
    for (const el of document.querySelectorAll(".write-only")) el.hidden = !state.canWrite;
    show(true);
    startRefreshing();
  } catch (err) {
    if (err.status === 401) {
      // A token that no longer works (expired, revoked, secret rotated)
      // is said so; a first visit without one is just the form.
      signOut(state.token ? "Your session ended (" + err.message + "): sign in again." : "");
      return;
    }
    $("signin-error").textContent = err.message;
    show(false);
  }
}

$("signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  $("signin-error").textContent = "";
  try {
    const login = await call("/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ username: $("username").value, password: $("password").value }),
    });
    state.token = login.accessToken;
    sessionStorage.setItem("rscoord.token", state.token);
    $("password").value = "";
    start();
  } catch (err) {
    $("signin-error").textContent = err.message;
  }
});

// One refresh loop at a time: each round schedules the next once it has
// ended, so that a slow server never has rounds piling up, and signing in
// again never adds a second loop.
function startRefreshing() {
  stopRefreshing();
  const loop = {};
  state.loop = loop;
  const round = async () => {
    await refresh();
    if (state.loop === loop) loop.timer = setTimeout(round, refreshMs);
  };
  round();
}

function stopRefreshing() {
  if (state.loop) clearTimeout(state.loop.timer);
  state.loop = null;
}

// signOut stops refreshing, forgets the token and everything the session
// showed (the next user may see less), and shows the sign-in form with
// message.
function signOut(message) {
  stopRefreshing();
  state.token = null;
  state.selected = null;
  state.updatedAt = "";
  sessionStorage.removeItem("rscoord.token");
  for (const table of document.querySelectorAll("#app table")) table.tBodies[0].replaceChildren();
  $("group").hidden = true;
  $("cluster").hidden = true;
  $("app").classList.remove("stale");
  $("health").textContent = "";
  $("status").textContent = "";
  $("signin-error").textContent = message;
  show(false);
}

// Sign out revokes the token on the server too: dropping it from the page
// alone would leave it valid until it expires for whoever copied it.
$("signout").addEventListener("click", async () => {
  const token = state.token;
  signOut("");
  if (!token) return;
  try {
    await call("/auth/logout", { method: "POST", headers: { "Authorization": "Bearer " + token } });
  } catch (err) {
    if (err.status !== 401) $("signin-error").textContent = "Signed out here, but the server did not revoke the session: " + err.message;
  }
});

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function fill(tableId, items, render) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    render(row, item);
    body.appendChild(row);
  }
}

const shards = (list) => (list || []).map((s) => s.shardIndex).join(",");

// Human-readable times: "12 s ago", "3 s left", and local clock times.
function span(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}
const ago = (iso) => (iso ? span(Date.now() - Date.parse(iso)) + " ago" : "never");
const clock = (iso) => (iso ? new Date(iso).toLocaleString() : "");
const enc = encodeURIComponent;

async function refresh() {
  try {
    const [{ groups, missingReplicas }, health] = await Promise.all([call("/monitoring/groups"), call("/monitoring/health")]);
    // In cluster mode the lists gather every replica's groups; a replica
    // that did not answer is named, and the groups of its streams are
    // missing below.
    const missing = (missingReplicas || []).map((m) =>
      " · Incomplete: replica " + m.id + " did not answer (" + m.error + "), missing " +
      ((m.units || []).join(", ") || "no streams"));
    $("health").textContent = "Coordinator " + health.status + " · Redis " + health.redisDetail.status +
      (health.redisDetail.message ? " (" + health.redisDetail.message + ")" : "") + " · Store " + health.store.status +
      missing.join("");
    $("health").className = health.status === "UP" && missing.length === 0 ? "ok" : "error";
    // A group deleted meanwhile is no longer shown as selected.
    if (state.selected && !groups.some((g) => g.streamPrefix + "/" + g.consumerGroup === state.selected)) {
      state.selected = null;
      $("group").hidden = true;
    }
    fill("groups", groups, (row, g) => {
      const key = g.streamPrefix + "/" + g.consumerGroup;
      row.dataset.key = key;
      if (state.selected === key) row.className = "selected";
      cell(row, g.streamPrefix);
      cell(row, g.consumerGroup);
      cell(row, g.state);
      cell(row, g.shardCount);
      cell(row, Object.keys(g.targetAssignmentSummary).length);
      cell(row, g.groupEpoch);
      cell(row, g.metadataVersion);
      cell(row, g.activeMigration ? g.activeMigration.reshardingId + " " + g.activeMigration.state : "");
      row.addEventListener("click", () => { state.selected = key; startRefreshing(); });
    });
    await refreshCluster();
    if (state.selected) await refreshGroup(state.selected);
    state.updatedAt = new Date().toLocaleTimeString();
    $("status").textContent = "Updated " + state.updatedAt;
    $("app").classList.remove("stale");
  } catch (err) {
    if (err.status === 401) {
      stopRefreshing();
      start();
      return;
    }
    // The last answers stay for reference but must not read as current:
    // the health line says what failed, the tables are marked out of date.
    $("health").textContent = "No answer from the coordinator: " + err.message + " · the tables below are from " +
      (state.updatedAt || "no successful refresh") + " and out of date";
    $("health").className = "error";
    $("status").textContent = "Refresh failed: " + err.message;
    $("app").classList.add("stale");
  }
}

// The cluster mode (--store etcd): every replica, its liveness and role,
// and which replica runs each group. A server that runs alone answers
// 404: the section stays hidden.
async function refreshCluster() {
  let view;
  try {
    view = await call("/monitoring/cluster");
  } catch (err) {
    if (err.status === 404) {
      $("cluster").hidden = true;
      return;
    }
    if (err.status === 401) throw err;
    $("cluster").hidden = false;
    $("cluster-note").textContent = "Cluster view unavailable: " + err.message;
    return;
  }
  $("cluster").hidden = false;
  const live = view.replicas.filter((r) => r.live).length;
  $("cluster-note").textContent = "Store " + view.store + " · " + live + " of " + view.replicas.length +
    " replicas live · answered by " + view.self.id;
  fill("replicas", view.replicas, (row, r) => {
    row.className = r.live ? "" : "dead";
    row.dataset.replica = r.id;
    cell(row, r.id);
    cell(row, r.advertiseUrl);
    cell(row, r.live ? "yes" : "NO");
    cell(row, r.role);
    cell(row, (r.units || []).join(", "));
    cell(row, r.groupsOwned);
  });
  fill("group-owners", view.groups, (row, g) => {
    row.className = g.owner ? "" : "mismatch";
    cell(row, g.streamPrefix);
    cell(row, g.consumerGroup);
    cell(row, g.owner || "nobody (ownership is moving)");
    cell(row, g.ownerUrl);
  });
}

async function refreshGroup(key) {
  const [prefix, group] = key.split("/");
  const base = "/monitoring/streams/" + enc(prefix) + "/groups/" + enc(group);
  const [members, assignments, migrations, live, audit] = await Promise.all([
    call(base + "/members"),
    call(base + "/assignments"),
    call(base + "/migrations"),
    // Length, pending and lag come from Redis: absent without --redis.
    call(base + "/shards").catch((err) => ({ error: err.message, shards: [] })),
    call("/monitoring/audit?limit=20&streamPrefix=" + enc(prefix)).catch(() => ({ entries: [] })),
  ]);
  $("group").hidden = false;
  $("group-title").textContent = prefix + " / " + group;
  const now = Date.now();
  fill("members", members.members, (row, m) => {
    // A live member whose lease has passed is dead, whatever the
    // coordinator recorded: it stopped reading on its own (fail closed).
    const leaseLeft = m.memberLeaseExpiresAt ? Date.parse(m.memberLeaseExpiresAt) - now : null;
    const pastLease = leaseLeft !== null && leaseLeft <= 0 && (m.state === "ACTIVE" || m.state === "STARTING" || m.state === "LEAVING");
    row.className = pastLease ? "dead" : "";
    cell(row, m.memberId);
    cell(row, pastLease ? "PAST LEASE (recorded " + m.state + ")" : m.state);
    cell(row, m.memberEpoch);
    cell(row, shards(m.currentAssignment));
    cell(row, shards(m.revoking));
    cell(row, ago(m.lastHeartbeatAt)).title = clock(m.lastHeartbeatAt);
    cell(row, leaseLeft === null ? "" : leaseLeft > 0 ? span(leaseLeft) + " left" : "expired " + span(leaseLeft) + " ago").title = clock(m.memberLeaseExpiresAt);
  });
  // One row per shard: who should own it, who reports owning it, its
  // ownership token, and what Redis says.
  const perShard = new Map();
  const at = (s) => { if (!perShard.has(s)) perShard.set(s, { target: [], current: [], revoking: [], ownerEpoch: "", redis: null }); return perShard.get(s); };
  for (const [member, list] of Object.entries(assignments.targetAssignment)) for (const s of list) at(s.shardIndex).target.push(member);
  for (const [member, list] of Object.entries(assignments.currentAssignments)) for (const s of list) at(s.shardIndex).current.push(member);
  for (const [member, list] of Object.entries(assignments.revokeProgress)) for (const s of list) at(s.shardIndex).revoking.push(member);
  for (const s of assignments.ownerEpochs || []) at(s.shardIndex).ownerEpoch = s.ownerEpoch;
  for (const s of live.shards || []) at(s.shardIndex).redis = s;
  const rows = [...perShard.entries()].sort((a, b) => a[0] - b[0]);
  $("shards-note").textContent = live.error ? "Redis figures unavailable: " + live.error : "";
  fill("assignment", rows, (row, [shard, who]) => {
    const settled = who.target.join(",") === who.current.join(",") && who.revoking.length === 0;
    row.className = settled ? "" : "mismatch";
    cell(row, shard);
    cell(row, who.target.join(", "));
    cell(row, who.current.join(", "));
    cell(row, who.revoking.join(", "));
    cell(row, who.ownerEpoch);
    const r = who.redis;
    cell(row, r ? (r.exists ? r.length : "missing") : "");
    cell(row, r ? r.pending : "");
    cell(row, r ? (r.lag === null ? "unknown" : r.lag) : "");
  });
  $("violations").textContent = assignments.invariantViolations.length ? "Invariant violations: " + assignments.invariantViolations.join("; ") : "";
  fill("migrations", migrations.migrations, (row, m) => {
    cell(row, m.reshardingId);
    cell(row, m.fromShardCount + " → " + m.toShardCount);
    cell(row, m.state);
    cell(row, m.detail || "");
    cell(row, clock(m.createdAt));
    cell(row, ago(m.updatedAt)).title = clock(m.updatedAt);
  });
  fill("audit", audit.entries || [], (row, e) => {
    cell(row, ago(e.time)).title = clock(e.time);
    cell(row, e.operation);
    cell(row, e.requestedBy + (e.principal && e.principal !== e.requestedBy ? " (" + e.principal + ")" : ""));
    cell(row, e.consumerGroup + (e.reshardingId ? " " + e.reshardingId : ""));
    cell(row, e.result.outcome + " " + e.result.status + (e.result.errorCode ? " " + e.result.errorCode : ""));
    cell(row, e.reason);
  });
}

// Message browser: one page of a shard's entries (nothing is delivered
// or acknowledged); "Next" follows the server's cursor.
async function browse(cursor) {
  if (!state.selected) return;
  const [prefix, group] = state.selected.split("/");
  const shard = $("browse-shard").value;
  let path = "/monitoring/streams/" + enc(prefix) + "/groups/" + enc(group) + "/shards/" + enc(shard) +
    "/messages?limit=20&direction=" + ($("browse-backward").checked ? "BACKWARD" : "FORWARD");
  if (cursor) path += "&cursor=" + enc(cursor);
  try {
    const page = await call(path);
    $("browse-error").textContent = "";
    fill("messages", page.messages, (row, m) => {
      cell(row, m.id);
      cell(row, Object.entries(m.fields).map(([k, v]) => k + "=" + v).join(" "));
    });
    state.browse = page.nextCursor;
    $("browse-next").hidden = !page.nextCursor;
  } catch (err) {
    $("browse-error").textContent = err.message;
  }
}
$("browse-form").addEventListener("submit", (ev) => { ev.preventDefault(); browse(""); });
$("browse-next").addEventListener("click", () => browse(state.browse));

// Actions (WRITE role). Each form first shows what it will do; only the
// confirmation sends it. Every mutation carries requestedBy and a reason,
// and the server audits it.
function ask(summary, send) {
  state.pending = send;
  $("confirm-text").textContent = summary;
  $("confirm").hidden = false;
  $("action-result").textContent = "";
}
$("confirm-no").addEventListener("click", () => { state.pending = null; $("confirm").hidden = true; });
$("confirm-yes").addEventListener("click", async () => {
  const send = state.pending;
  state.pending = null;
  $("confirm").hidden = true;
  if (!send) return;
  try {
    await send();
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
$("migration-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const [prefix, group] = selectedRef();
  const id = $("migration-id").value.trim();
  const op = ev.submitter && ev.submitter.value === "complete" ? "complete" : "rollback";
  const path = op === "complete"
    ? "/streams/" + enc(prefix) + "/migrations/" + enc(id) + "/complete"
    : "/streams/" + enc(prefix) + "/groups/" + enc(group) + "/migrations/" + enc(id) + "/rollback";
  ask(op + " migration " + id + " of " + prefix, () => post(path, { requestedBy: state.user, reason: reason("migration-reason") }));
});
$("delete-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const [prefix, group] = selectedRef();
  const force = $("delete-force").checked;
  ask("delete group " + group + " of " + prefix + (force ? " (force)" : ""), () =>
    post("/streams/" + enc(prefix) + "/groups/" + enc(group), { requestedBy: state.user, reason: reason("delete-reason"), force }, "DELETE"));
});

start();
