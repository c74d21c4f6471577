// rscoord console: plain JavaScript over the /coord/v1 API. Every value
// from the server is put in the page with textContent, never as HTML.
"use strict";

const api = "/coord/v1";
const refreshMs = 2000;
const state = { token: sessionStorage.getItem("rscoord.token"), selected: null, timer: null };

const $ = (id) => document.getElementById(id);

async function call(path, options = {}) {
  // X-Requested-With: a 401 then comes without a Basic challenge, which
  // would make the browser open its own password dialog.
  const headers = Object.assign({ "Accept": "application/json", "X-Requested-With": "rscoord-console" }, options.headers || {});
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  const resp = await fetch(api + path, Object.assign({}, options, { headers }));
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(body.message || resp.statusText);
    err.status = resp.status;
    throw err;
  }
  return body;
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
    show(true);
    refresh();
    state.timer = setInterval(refresh, refreshMs);
  } catch (err) {
    if (err.status === 401) {
      state.token = null;
      sessionStorage.removeItem("rscoord.token");
      show(false);
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

$("signout").addEventListener("click", () => {
  sessionStorage.removeItem("rscoord.token");
  state.token = null;
  clearInterval(state.timer);
  show(false);
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
const enc = encodeURIComponent;

async function refresh() {
  try {
    const { groups } = await call("/monitoring/groups");
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
      row.addEventListener("click", () => { state.selected = key; refresh(); });
    });
    if (state.selected) await refreshGroup(state.selected);
    $("status").textContent = "Updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("status").textContent = "Refresh failed: " + err.message;
    if (err.status === 401) start();
  }
}

async function refreshGroup(key) {
  const [prefix, group] = key.split("/");
  const base = "/monitoring/streams/" + enc(prefix) + "/groups/" + enc(group);
  const [members, assignments, migrations, audit] = await Promise.all([
    call(base + "/members"),
    call(base + "/assignments"),
    call(base + "/migrations"),
    call("/monitoring/audit?limit=20&streamPrefix=" + enc(prefix)).catch(() => ({ entries: [] })),
  ]);
  $("group").hidden = false;
  $("group-title").textContent = prefix + " / " + group;
  fill("members", members.members, (row, m) => {
    cell(row, m.memberId);
    cell(row, m.state);
    cell(row, m.memberEpoch);
    cell(row, shards(m.currentAssignment));
    cell(row, shards(m.revoking));
    cell(row, m.memberLeaseExpiresAt || "");
  });
  // One row per shard: who should own it, who reports owning it.
  const perShard = new Map();
  const at = (s) => { if (!perShard.has(s)) perShard.set(s, { target: [], current: [], revoking: [] }); return perShard.get(s); };
  for (const [member, list] of Object.entries(assignments.targetAssignment)) for (const s of list) at(s.shardIndex).target.push(member);
  for (const [member, list] of Object.entries(assignments.currentAssignments)) for (const s of list) at(s.shardIndex).current.push(member);
  for (const [member, list] of Object.entries(assignments.revokeProgress)) for (const s of list) at(s.shardIndex).revoking.push(member);
  const rows = [...perShard.entries()].sort((a, b) => a[0] - b[0]);
  fill("assignment", rows, (row, [shard, who]) => {
    const settled = who.target.join(",") === who.current.join(",") && who.revoking.length === 0;
    row.className = settled ? "" : "mismatch";
    cell(row, shard);
    cell(row, who.target.join(", "));
    cell(row, who.current.join(", "));
    cell(row, who.revoking.join(", "));
  });
  $("violations").textContent = assignments.invariantViolations.length ? "Invariant violations: " + assignments.invariantViolations.join("; ") : "";
  fill("migrations", migrations.migrations, (row, m) => {
    cell(row, m.reshardingId);
    cell(row, m.fromShardCount);
    cell(row, m.toShardCount);
    cell(row, m.state);
    cell(row, m.updatedAt);
  });
  fill("audit", audit.entries || [], (row, e) => {
    cell(row, e.time);
    cell(row, e.operation);
    cell(row, e.principal);
    cell(row, e.consumerGroup);
    cell(row, e.result.outcome + " " + e.result.status + (e.result.errorCode ? " " + e.result.errorCode : ""));
    cell(row, e.reason);
  });
}

start();
