// rscoord console: the message browser. It reads pages of shard entries
// (nothing is delivered or acknowledged), of one shard or of every shard
// of the group merged by entry id, from the newest or from an entry id
// or a time the user names.
"use strict";

const pageSize = 20;
const maxSeq = (1n << 64n) - 1n;

// parseId reads "ms-seq" (or "ms") as BigInts, null when it is not one.
function parseId(s) {
  const m = /^(\d+)(?:-(\d+))?$/.exec(s);
  if (!m) return null;
  const ms = BigInt(m[1]), seq = m[2] === undefined ? 0n : BigInt(m[2]);
  return ms <= maxSeq && seq <= maxSeq ? { ms, seq } : null;
}

// startCursor turns what the user typed (an entry id, a time, or
// nothing) into the exclusive cursor that makes the first page start at
// that entry (or the newest before it, going backward): the server's
// cursor excludes the entry it names.
function startCursor(from, backward) {
  from = from.trim();
  if (from === "") return "";
  let id = parseId(from);
  if (id === null) {
    const t = Date.parse(from);
    if (Number.isNaN(t)) throw new Error("“" + from + "” is neither an entry id (ms-seq) nor a time");
    // Backward from a time: every entry of its millisecond and before;
    // forward: every entry from its millisecond on.
    id = backward ? { ms: BigInt(Math.max(t, 0)), seq: maxSeq } : { ms: BigInt(Math.max(t, 0)), seq: 0n };
  }
  if (backward) {
    // The entry itself is included: start just after it.
    if (id.seq < maxSeq) return id.ms + "-" + (id.seq + 1n);
    return id.ms < maxSeq ? id.ms + 1n + "-0" : "";
  }
  if (id.seq > 0n) return id.ms + "-" + (id.seq - 1n);
  return id.ms > 0n ? id.ms - 1n + "-" + maxSeq : "";
}

// compareIds orders entry ids numerically.
function compareIds(a, b) {
  const x = parseId(a), y = parseId(b);
  if (x.ms !== y.ms) return x.ms < y.ms ? -1 : 1;
  return x.seq === y.seq ? 0 : x.seq < y.seq ? -1 : 1;
}

// A browse holds its query and, per shard read, where its next page
// starts (undefined once the shard has nothing more).
function newBrowse() {
  if (!state.selected) return null;
  const [prefix, group] = state.selected.split("/");
  const backward = $("browse-backward").checked;
  const all = $("browse-all").checked;
  const from = startCursor($("browse-from").value, backward);
  const indexes = all ? (state.shardIndexes || []) : [parseInt($("browse-shard").value, 10)];
  if (indexes.length === 0 || indexes.some((i) => !Number.isInteger(i) || i < 0)) throw new Error("no shard to read");
  return { prefix, group, backward, cursors: new Map(indexes.map((i) => [i, from])) };
}

// nextPage reads one page from every shard that has more, keeps the
// pageSize entries that come first in the browse's order, and moves
// each shard's cursor past only the entries it showed: nothing is
// skipped, however entries of two shards interleave.
async function nextPage(b) {
  const open = [...b.cursors.entries()].filter(([, c]) => c !== undefined);
  const pages = await Promise.all(open.map(async ([shard, cursor]) => {
    let path = "/monitoring/streams/" + enc(b.prefix) + "/groups/" + enc(b.group) + "/shards/" + enc(shard) +
      "/messages?limit=" + pageSize + "&direction=" + (b.backward ? "BACKWARD" : "FORWARD");
    if (cursor) path += "&cursor=" + enc(cursor);
    const page = await call(path);
    return { shard, page };
  }));
  const merged = pages.flatMap(({ shard, page }) => page.messages.map((m) => ({ shard, m, last: page.nextCursor === null })));
  merged.sort((x, y) => (b.backward ? -1 : 1) * compareIds(x.m.id, y.m.id) || x.shard - y.shard);
  const shown = merged.slice(0, pageSize);
  for (const { shard, page } of pages) {
    const mine = shown.filter((e) => e.shard === shard);
    if (mine.length === page.messages.length) {
      // Everything read was shown: the server's cursor, or the end.
      b.cursors.set(shard, page.nextCursor === null ? undefined : page.nextCursor);
    } else if (mine.length > 0) {
      b.cursors.set(shard, mine[mine.length - 1].m.id);
    }
  }
  return shown;
}

async function browse(fresh) {
  try {
    if (fresh) state.browse = newBrowse();
    if (!state.browse) return;
    const shown = await nextPage(state.browse);
    $("browse-error").textContent = "";
    fill("messages", shown, (row, e) => {
      row.dataset.shard = e.shard;
      cell(row, e.m.id);
      cell(row, e.shard);
      cell(row, entryTime(e.m.id));
      cell(row, Object.entries(e.m.fields).map(([k, v]) => k + "=" + v).join(" "));
    });
    $("browse-next").hidden = ![...state.browse.cursors.values()].some((c) => c !== undefined);
  } catch (err) {
    $("browse-error").textContent = err.message;
  }
}

// entryTime is the time in an entry id's milliseconds, when it is one.
function entryTime(id) {
  const p = parseId(id);
  return p && p.ms < 8640000000000000n ? new Date(Number(p.ms)).toLocaleString() : "";
}

$("browse-form").addEventListener("submit", (ev) => { ev.preventDefault(); browse(true); });
$("browse-next").addEventListener("click", () => browse(false));
$("browse-all").addEventListener("change", () => { $("browse-shard").disabled = $("browse-all").checked; });
