// rscoord console: the selected group: its charts, members, shards,
// migrations (with their actions), autoscale panel and audit.
"use strict";

// The interval a member is told to heartbeat at when nothing moves, the
// coordinator's default: a member row that carries neither a late flag
// nor its interval is judged late against it.
const defaultHeartbeatMs = 3000;
// How many member polls the shards-per-member chart keeps (10 min at the
// refresh period): the coordinator keeps no history of assignments.
const memberPolls = 300;
// States in which a member may still read: its lease decides.
const liveStates = ["STARTING", "ACTIVE", "LEAVING"];

// What the page remembers of the selected group between refreshes.
const view = { key: null, history: null, historyAt: 0, polls: [] };

function resetView(key) {
  view.key = key;
  view.history = null;
  view.historyAt = 0;
  view.polls = [];
  discardResetPlan();
}

// memberStatus says what a member row shows: its state in words, and the
// classes that colour it. Past its lease a member is dead whatever the
// coordinator recorded (it stopped reading on its own, fail closed); a
// member whose heartbeat is older than two intervals, before its lease
// ends, is late. The server's late flag wins when it sends one.
function memberStatus(m, now) {
  const leaseLeft = m.memberLeaseExpiresAt ? Date.parse(m.memberLeaseExpiresAt) - now : null;
  const live = liveStates.includes(m.state);
  const pastLease = live && leaseLeft !== null && leaseLeft <= 0;
  const age = m.lastHeartbeatAt ? now - Date.parse(m.lastHeartbeatAt) : null;
  const interval = m.heartbeatIntervalMs || defaultHeartbeatMs;
  const late = live && !pastLease && (typeof m.late === "boolean" ? m.late : age !== null && age > 2 * interval);
  const revoking = (m.revoking || []).length > 0;
  let kind = (m.state || "").toLowerCase();
  if (pastLease) kind = "expired";
  else if (late) kind = "late";
  else if (revoking && live) kind = "revoking";
  let text = pastLease ? "PAST LEASE (recorded " + m.state + ")" : m.state;
  if (late) text += " · late";
  if (revoking && !pastLease) text += " · revoking";
  const dead = pastLease || m.state === "EXPIRED" || m.state === "FENCED";
  return { leaseLeft, kind, text, cls: (dead ? "dead " : "") + "member st-" + kind };
}

// clientOf names where a member runs, from the fields servers that know
// them send (client address, instance id, user agent).
function clientOf(m) {
  return [m.clientAddress, m.instanceId, m.userAgent].filter((v) => v).join(" · ");
}

async function refreshGroup(key) {
  const [prefix, group] = key.split("/");
  if (view.key !== key) resetView(key);
  const base = "/monitoring/streams/" + enc(prefix) + "/groups/" + enc(group);
  // The history changes once a collection round: it is read again only
  // after the coordinator's interval.
  const wantHistory = Date.now() - view.historyAt >= Math.max(refreshMs, view.history ? view.history.intervalMs / 2 : 0);
  const [members, assignments, migrations, live, audit, history, autoscale] = await Promise.all([
    call(base + "/members"),
    call(base + "/assignments"),
    call(base + "/migrations"),
    // Length, pending and lag come from Redis: absent without --redis.
    call(base + "/shards").catch((err) => { if (err.status === 401) throw err; return { error: err.message, shards: [] }; }),
    call("/monitoring/audit?limit=20&streamPrefix=" + enc(prefix)).catch(() => ({ entries: [] })),
    wantHistory ? call(base + "/history").catch((err) => ({ error: err.message })) : Promise.resolve(null),
    // A server without autoscaling answers 404: the panel stays hidden.
    call("/streams/" + enc(prefix) + "/autoscale").catch((err) => (err.status === 404 ? null : { error: err.message })),
  ]);
  if (view.key !== key) return; // another group was picked meanwhile
  if (history && !history.error) {
    view.history = history;
    view.historyAt = Date.now();
  }
  $("group").hidden = false;
  $("group-title").textContent = prefix + " / " + group;
  const g = (state.groups || []).find((x) => x.streamPrefix === prefix && x.consumerGroup === group);
  $("group-state").textContent = g ? "State " + g.state + (g.state === "STABLE" ? "" : " (members are still moving shards)") : "";
  $("group-state").className = g && g.state !== "STABLE" && g.state !== "EMPTY" ? "badge warn" : "badge";
  const now = Date.now();

  fill("members", members.members, (row, m) => {
    const st = memberStatus(m, now);
    row.className = st.cls;
    row.dataset.member = m.memberId;
    cell(row, m.memberId);
    cell(row, st.text, "state");
    cell(row, m.memberEpoch);
    cell(row, shards(m.currentAssignment));
    cell(row, shards(m.revoking));
    cell(row, ago(m.lastHeartbeatAt)).title = clock(m.lastHeartbeatAt);
    const left = st.leaseLeft;
    cell(row, left === null ? "" : left > 0 ? span(left) + " left" : "expired " + span(left) + " ago").title = clock(m.memberLeaseExpiresAt);
    cell(row, clientOf(m), "muted");
  });
  recordPoll(members.members, now);

  // One row per shard: who should own it, who reports owning it, its
  // ownership token, what Redis says, and its trend.
  const perShard = new Map();
  const at = (s) => { if (!perShard.has(s)) perShard.set(s, { target: [], current: [], revoking: [], ownerEpoch: "", redis: null }); return perShard.get(s); };
  for (const [member, list] of Object.entries(assignments.targetAssignment)) for (const s of list) at(s.shardIndex).target.push(member);
  for (const [member, list] of Object.entries(assignments.currentAssignments)) for (const s of list) at(s.shardIndex).current.push(member);
  for (const [member, list] of Object.entries(assignments.revokeProgress)) for (const s of list) at(s.shardIndex).revoking.push(member);
  for (const s of assignments.ownerEpochs || []) at(s.shardIndex).ownerEpoch = s.ownerEpoch;
  for (const s of live.shards || []) at(s.shardIndex).redis = s;
  const rows = [...perShard.entries()].sort((a, b) => a[0] - b[0]);
  state.shardIndexes = rows.map(([s]) => s);
  $("shards-note").textContent = live.error ? "Redis figures unavailable: " + live.error : "";
  const trend = new Map(((view.history && view.history.shards) || []).map((s) => [s.shardIndex, s.samples]));
  fill("assignment", rows, (row, [shard, who]) => {
    const settled = who.target.join(",") === who.current.join(",") && who.revoking.length === 0;
    const r = who.redis;
    const draining = Boolean(r && r.draining);
    row.className = [settled ? "" : "mismatch", draining ? "draining" : ""].join(" ").trim();
    row.dataset.shard = shard;
    cell(row, shard);
    cell(row, who.target.join(", "));
    cell(row, who.current.join(", "));
    cell(row, who.revoking.join(", "));
    cell(row, who.ownerEpoch);
    cell(row, r ? (r.exists ? r.length : "missing") : "");
    cell(row, r ? r.pending : "");
    cell(row, r ? (r.lag === null ? "unknown" : r.lag) : "");
    cell(row, [draining ? "draining" : "", settled ? "" : "moving"].filter((v) => v).join(", "), "state");
    const samples = trend.get(shard) || [];
    cell(row, "").appendChild(sparkline(samples.map((s) => s.lag), "lag of shard " + shard + " over the last " + samples.length + " samples"));
  });
  $("violations").textContent = assignments.invariantViolations.length ? "Invariant violations: " + assignments.invariantViolations.join("; ") : "";

  drawCharts();

  fill("migrations", migrations.migrations, (row, m) => {
    row.dataset.migration = m.reshardingId;
    row.className = "mig-" + m.state.toLowerCase();
    cell(row, m.reshardingId);
    cell(row, m.fromShardCount + " → " + m.toShardCount);
    cell(row, m.state, "state");
    cell(row, m.detail || "");
    cell(row, clock(m.createdAt));
    cell(row, ago(m.updatedAt)).title = clock(m.updatedAt);
    migrationActions(cell(row, ""), prefix, group, m);
  });
  showAutoscale(autoscale);
  fill("audit", audit.entries || [], (row, e) => {
    cell(row, ago(e.time)).title = clock(e.time);
    cell(row, e.operation);
    cell(row, e.requestedBy + (e.principal && e.principal !== e.requestedBy ? " (" + e.principal + ")" : ""));
    cell(row, e.consumerGroup + (e.reshardingId ? " " + e.reshardingId : ""));
    cell(row, e.result.outcome + " " + e.result.status + (e.result.errorCode ? " " + e.result.errorCode : ""));
    cell(row, e.reason);
  });
}

// recordPoll keeps how many shards each member reported owning at this
// poll, for the shards-per-member chart.
function recordPoll(members, now) {
  const counts = {};
  for (const m of members) {
    if (liveStates.includes(m.state) || (m.currentAssignment || []).length > 0) counts[m.memberId] = (m.currentAssignment || []).length;
  }
  view.polls.push({ at: now, counts });
  if (view.polls.length > memberPolls) view.polls.splice(0, view.polls.length - memberPolls);
}

// At most this many members get a line of their own in the chart.
const chartMembers = 8;

function drawCharts() {
  const h = view.history;
  const box = $("charts");
  const figures = [];
  const pick = (f) => (h ? h.group.map((s) => [Date.parse(s.at), f(s)]) : []);
  const empty = h && !h.tracked ? "not tracked: the coordinator's bound on history left this group out" : "no samples yet (they come from Redis)";
  figures.push(lineChart("Lag and pending (entries)", [
    { name: "lag", cls: 0, points: pick((s) => s.lag) },
    { name: "pending", cls: 1, points: pick((s) => s.pending) },
  ], { empty }));
  figures.push(lineChart("Throughput (entries per second)", [
    { name: "appends", cls: 2, points: pick((s) => s.appendsPerSecond) },
    { name: "acks", cls: 3, points: pick((s) => s.acksPerSecond) },
  ], { empty, unit: "/s" }));
  const ids = [...new Set(view.polls.flatMap((p) => Object.keys(p.counts)))].sort().slice(0, chartMembers);
  figures.push(lineChart("Shards per member (this page's polls)", ids.map((id, i) => ({
    name: id, cls: 4 + (i % 4), points: view.polls.map((p) => [p.at, id in p.counts ? p.counts[id] : null]),
  })), { empty: "no members" }));
  box.replaceChildren(...figures);
  $("charts-note").textContent = h
    ? "Samples every " + span(h.intervalMs) + " over the last " + span(h.windowMs) + (h.tracked ? "" : " · not tracked") : "";
}

// migrationActions puts the actions a migration in its state allows on
// its own row, for users who may write: roll back only an ACTIVE one,
// complete one not yet ended (docs/protocol.md §7).
function migrationActions(td, prefix, group, m) {
  if (!state.canWrite) return;
  const id = m.reshardingId;
  const act = (label, op, path) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.className = "write";
    b.dataset.action = op;
    b.addEventListener("click", () => ask(op + " migration " + id + " of " + prefix, (reason) =>
      post(path, { requestedBy: state.user, reason }), true));
    td.appendChild(b);
  };
  if (m.state === "ACTIVE") act("Roll back…", "rollback", "/streams/" + enc(prefix) + "/groups/" + enc(group) + "/migrations/" + enc(id) + "/rollback");
  if (["ACTIVE", "DRAINING", "ROLLING_BACK"].includes(m.state)) act("Complete…", "complete", "/streams/" + enc(prefix) + "/migrations/" + enc(id) + "/complete");
}

// showAutoscale shows the stream's autoscale policy and last decision,
// where the server has autoscaling (null: it answered 404).
function showAutoscale(a) {
  const box = $("autoscale");
  box.hidden = a === null;
  if (a === null) return;
  if (a.error) {
    $("autoscale-policy").textContent = "Autoscale unavailable: " + a.error;
    $("autoscale-decision").textContent = "";
    return;
  }
  const p = a.policy || {};
  const bounds = Object.entries(p).filter(([k]) => k !== "mode").map(([k, v]) => k + " " + v).join(", ");
  $("autoscale-policy").textContent = "Mode " + (p.mode || "unknown") + (p.mode === "dry-run" ? " (decides, never scales)" : "") + (bounds ? " · " + bounds : "");
  $("autoscale-policy").className = "badge mode-" + String(p.mode || "unknown");
  const d = a.lastDecision;
  $("autoscale-decision").textContent = d
    ? "Last decision: " + d.action + " " + d.fromShards + " → " + d.toShards + " (" + d.reason + "), " + ago(d.at) + ", " + (d.taken ? "taken" : "not taken")
    : "No decision yet";
}
