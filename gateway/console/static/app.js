// rscoord console: plain JavaScript over the /coord/v1 API. Every value
// from the server is put in the page with textContent, never as HTML.
"use strict";

const api = "/coord/v1";
const refreshMs = 2000;
// A request that has no answer by then fails: a coordinator that hangs
// (paused, its host gone, a proxy holding the connection) must read as an
// error, not as the last answers it gave.
const requestTimeoutMs = 10000;
// groups is the last list of groups; shardIndexes the selected group's
// shards, for the message browser.
const state = { token: sessionStorage.getItem("rscoord.token"), selected: null, loop: null, updatedAt: "", user: "", canWrite: false, pending: null, browse: null, groups: [], shardIndexes: [] };

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
      err.code = body.errorCode || "";
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
  $("charts").replaceChildren();
  $("autoscale").hidden = true;
  state.browse = null;
  resetView(null);
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

// detail is a health component as an object: the server's detail field
// when it sends one, else its object, else a plain status string.
function detail(obj, plain) {
  if (obj && typeof obj === "object") return obj;
  if (plain && typeof plain === "object") return plain;
  return { status: plain || "unknown" };
}

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
    const redis = detail(health.redisDetail, health.redis);
    const down = (health.replicas || []).filter((r) => r.status !== "UP").map((r) => " · Replica " + r.id + " " + r.status + (r.message ? " (" + r.message + ")" : ""));
    $("health").textContent = "Coordinator " + health.status + " · Redis " + redis.status +
      (redis.message ? " (" + redis.message + ")" : "") + " · Store " + health.store.status +
      down.join("") + missing.join("");
    $("health").className = health.status === "UP" && missing.length === 0 && down.length === 0 ? "ok" : "error";
    state.groups = groups;
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
      cell(row, g.state, g.state === "STABLE" || g.state === "EMPTY" ? "state" : "state warn").title =
        g.state === "STABLE" || g.state === "EMPTY" ? "" : "not stable: members are still moving shards";
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
    row.className = r.live ? "" : "dead replica-down";
    row.dataset.replica = r.id;
    cell(row, r.id);
    cell(row, r.advertiseUrl);
    cell(row, r.live ? "yes" : "NO (down)", r.live ? "" : "state bad");
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
