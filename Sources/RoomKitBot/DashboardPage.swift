/// The dashboard served at `GET /` of the control API: one self-contained
/// page (HTML, CSS, a little JS), no external fetch. It reads
/// `GET /v1/rooms?offset=&limit=&filter=`, `GET /v1/plugins` and the SSE
/// stream `GET /v1/events/stream`, all with `Authorization: Bearer <token>`
/// when the bot has a `controlToken` (the page asks for it and keeps it in
/// the tab's sessionStorage, never in a URL).
enum DashboardPage {
    /// The page, with `nonce` on its one style sheet and one script (the
    /// Content-Security-Policy allows nothing else).
    static func html(nonce: String, tokenRequired: Bool) -> String {
        template
            .replacingOccurrences(of: "{{NONCE}}", with: nonce)
            .replacingOccurrences(of: "{{TOKEN_REQUIRED}}", with: tokenRequired ? "true" : "false")
    }

    private static let template = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>roombot dashboard</title>
<link rel="icon" href="data:,">
<style nonce="{{NONCE}}">
:root { --bg:#f6f7f9; --panel:#fff; --fg:#1d2330; --muted:#687085; --line:#e3e6ec; --accent:#2f6fed;
        --ok:#1f9d55; --warn:#c27c0e; --bad:#d23c3c; --mono:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
@media (prefers-color-scheme: dark) {
  :root { --bg:#12151b; --panel:#1a1f28; --fg:#e4e7ee; --muted:#8f97a8; --line:#2a313d; --accent:#6b9bff; }
}
* { box-sizing: border-box; } [hidden] { display:none !important; }
body { margin:0; font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif; background:var(--bg); color:var(--fg); }
header { display:flex; align-items:center; gap:16px; padding:10px 20px; background:var(--panel); border-bottom:1px solid var(--line); }
header h1 { font-size:17px; margin:0; } header h1 span { color:var(--muted); font-weight:400; }
#live { font-size:12px; padding:2px 8px; border-radius:10px; background:var(--line); }
#live.on { background:var(--ok); color:#fff; } #live.off { background:var(--bad); color:#fff; }
#auth, #change-token { margin-left:auto; } #auth { display:flex; gap:6px; align-items:center; }
main { padding:16px 20px; display:grid; gap:16px; grid-template-columns: minmax(0,3fr) minmax(0,2fr); }
section { background:var(--panel); border:1px solid var(--line); border-radius:8px; padding:12px 14px; min-width:0; }
section.wide { grid-column: 1 / -1; }
h2 { font-size:15px; margin:0 0 8px; display:flex; gap:10px; align-items:center; }
h2 .count { color:var(--muted); font-weight:400; font-size:13px; }
.bar { display:flex; gap:8px; align-items:center; flex-wrap:wrap; margin-bottom:8px; }
input, button { font:inherit; color:inherit; background:var(--bg); border:1px solid var(--line); border-radius:6px; padding:4px 8px; }
button { cursor:pointer; } button:hover:not(:disabled) { border-color:var(--accent); } button:disabled { opacity:.45; cursor:default; }
input[type=search] { min-width:260px; }
table { width:100%; border-collapse:collapse; font-size:13px; }
.scroll { max-height:46vh; overflow:auto; }
.scroll th { position:sticky; top:0; background:var(--panel); }
th { text-align:left; color:var(--muted); font-weight:500; border-bottom:1px solid var(--line); padding:4px 6px; white-space:nowrap; }
td { border-bottom:1px solid var(--line); padding:3px 6px; white-space:nowrap; }
td.num { text-align:right; font-variant-numeric: tabular-nums; } td.room { font-family:var(--mono); }
.pill { display:inline-block; padding:0 7px; border-radius:9px; font-size:12px; background:var(--line); }
.r-LOGINED,.r-RECONNECTED,.s-loaded { background:#d7f2e2; color:#14663a; }
.r-LOGINING,.r-RECONNECTING { background:#fdf0d5; color:#7a4d05; }
.r-LOGIN_FAILED,.r-RECONNECT_FAILED,.r-KICK_OUT,.r-LOGOUT_FAILED,.s-failed,.s-quarantined { background:#fbdcdc; color:#8e1f1f; }
.r-LOGOUT,.s-unloaded { background:var(--line); color:var(--muted); }
.flash { animation: flash 1.2s ease-out; } @keyframes flash { from { background:#ffe58a; } to { background:transparent; } }
.tiles { display:flex; gap:6px; flex-wrap:wrap; }
.grow { flex:1; } .muted { color:var(--muted); } .err { color:var(--bad); }
#tail { font-family:var(--mono); font-size:12px; height:260px; overflow:auto; background:var(--bg); border-radius:6px; padding:6px 8px; }
#tail div { white-space:pre-wrap; overflow-wrap:anywhere; } #tail .ev { color:var(--accent); }
.empty { color:var(--muted); padding:10px 6px; }
</style>
</head>
<body>
<header>
  <h1>roombot <span>dashboard</span></h1>
  <span id="live" title="live event stream">connecting…</span>
  <span id="updated" class="muted"></span>
  <form id="auth" hidden>
    <label for="token" class="muted">control token</label>
    <input id="token" type="password" autocomplete="off" size="24">
    <button id="save-token" type="submit">Use</button>
  </form>
  <button id="change-token" hidden>Token…</button>
</header>
<main>
  <section class="wide" id="rooms-section">
    <h2>Rooms <span class="count" id="room-count"></span></h2>
    <div class="bar">
      <input id="filter" type="search" placeholder="filter: room, reason or phase" title="terms separated by spaces; each must be part of the room ID or equal its reason or phase">
      <div class="tiles" id="by-reason"></div>
      <span class="grow"></span>
      <button id="prev">‹ Prev</button><span id="page-info" class="muted"></span><button id="next">Next ›</button>
    </div>
    <div class="scroll"><table id="rooms"><thead><tr>
      <th>Room</th><th>Reason</th><th>Phase</th><th>Error code</th><th>Member ID</th><th>Members</th><th>Seq</th><th>Writable</th><th>Last event</th>
    </tr></thead><tbody></tbody></table></div>
  </section>
  <section id="plugins-section">
    <h2>Plugins <span class="count" id="plugin-count"></span></h2>
    <table id="plugins"><thead><tr id="plugin-head"></tr></thead><tbody></tbody></table>
    <div id="plugin-note" class="muted"></div>
  </section>
  <section id="events-section">
    <h2>Live events <span class="count" id="event-count"></span></h2>
    <div class="bar">
      <button id="pause">Pause</button><button id="clear">Clear</button>
      <span id="paused-info" class="muted"></span>
    </div>
    <div id="tail"></div>
  </section>
</main>
<script nonce="{{NONCE}}">
"use strict";
const TOKEN_REQUIRED = {{TOKEN_REQUIRED}};
const PAGE = 100, TAIL = 500, REFRESH_MS = 2000;
const $ = (id) => document.getElementById(id);
const state = { offset: 0, filter: "", rows: new Map(), paused: false, held: [], incoming: [], frame: 0, pluginsStale: false,
                seen: 0, streamAbort: null, authFailed: false };

function token() { return sessionStorage.getItem("roombot.controlToken") || ""; }
function headers() { const t = token(); return t ? { "Authorization": "Bearer " + t } : {}; }
function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
function pill(text, prefix) { return el("span", text, "pill " + prefix + text); }
function ago(ts) {
  if (ts === null || ts === undefined) return "—";
  const s = Math.max(0, Math.round((Date.now() - ts) / 1000));
  return s < 60 ? s + " s ago" : s < 3600 ? Math.floor(s / 60) + " min ago" : Math.floor(s / 3600) + " h ago";
}

function needToken(why) {
  state.authFailed = true;
  $("auth").hidden = false; $("change-token").hidden = true;
  $("live").textContent = why; $("live").className = "off";
}

async function api(path, init) {
  const res = await fetch(path, Object.assign({ headers: headers(), cache: "no-store" }, init || {}));
  if (res.status === 401) { needToken("token needed"); throw new Error("401"); }
  const body = await res.json();
  if (!res.ok) throw new Error(body.message || ("HTTP " + res.status));
  return body;
}

// ---- Rooms: one page at a time, refreshed, and patched live from the stream.
async function loadRooms() {
  const q = new URLSearchParams({ offset: String(state.offset), limit: String(PAGE), filter: state.filter });
  const page = await api("/v1/rooms?" + q.toString());
  if (page.rooms.length === 0 && page.offset > 0 && page.matched > 0) {
    // The list shrank under the current page: go to the last page there is.
    state.offset = Math.floor((page.matched - 1) / PAGE) * PAGE;
    return loadRooms();
  }
  const tbody = $("rooms").tBodies[0];
  tbody.replaceChildren();
  state.rows.clear();
  for (const r of page.rooms) {
    const tr = el("tr"); tr.dataset.room = r.room;
    const cells = {
      room: el("td", r.room, "room"), reason: el("td", undefined, "reason"), phase: el("td", r.phase, "phase"),
      errorCode: el("td", String(r.errorCode), "num error-code"), memberId: el("td", r.memberId === null ? "—" : String(r.memberId), "num"),
      members: el("td", String(r.members), "num members"), seq: el("td", String(r.seq), "num seq"),
      writable: el("td", r.writable ? "yes" : "no", "writable"), last: el("td", ago(r.lastEventTs), "last"),
    };
    cells.reason.append(pill(r.reason, "r-"));
    cells.last.title = r.lastEventTs ? new Date(r.lastEventTs).toISOString() : "";
    Object.values(cells).forEach((c) => tr.append(c));
    tbody.append(tr);
    state.rows.set(r.room, { tr, cells, lastEventTs: r.lastEventTs, reason: r.reason });
  }
  if (page.rooms.length === 0) { const tr = el("tr"); const td = el("td", "no rooms match", "empty"); td.colSpan = 9; tr.append(td); tbody.append(tr); }
  const first = page.matched === 0 ? 0 : page.offset + 1, last = page.offset + page.rooms.length;
  $("page-info").textContent = first.toLocaleString() + "–" + last.toLocaleString() + " of " + page.matched.toLocaleString();
  $("room-count").textContent = page.total.toLocaleString() + " rooms" + (state.filter ? ", " + page.matched.toLocaleString() + " match" : "");
  $("prev").disabled = page.offset === 0;
  $("next").disabled = last >= page.matched;
  const tiles = $("by-reason"); tiles.replaceChildren();
  Object.keys(page.byReason).sort().forEach((k) => { const p = pill(k + " " + page.byReason[k].toLocaleString(), "r-"); p.className = "pill r-" + k; tiles.append(p); });
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

function patchRoom(ev) {
  const row = state.rows.get(ev.room);
  if (!row) return;
  row.lastEventTs = ev.ts;
  row.cells.last.textContent = ago(ev.ts);
  if (ev.event === "roomStateChanged" && ev.reason !== row.reason) {
    row.reason = ev.reason;
    row.cells.reason.replaceChildren(pill(ev.reason, "r-"));
    row.cells.errorCode.textContent = String(ev.errorCode);
    row.cells.reason.classList.remove("flash"); void row.cells.reason.offsetWidth; row.cells.reason.classList.add("flash");
  } else if (ev.event === "phaseChanged") {
    row.cells.phase.textContent = ev.phase;
  } else if (ev.event === "beingAbleToCommitChange") {
    row.cells.writable.textContent = ev.writable ? "yes" : "no";
  }
}

// ---- Plugins: status and counters; reload where the endpoint exists.
async function loadPlugins() {
  const list = await api("/v1/plugins");
  const hasIsolation = list.some((p) => p.isolation !== undefined);
  const cols = ["Name", "Status"].concat(hasIsolation ? ["Isolation"] : [], ["Hooks", "Calls", "Failures", "Mean latency", ""]);
  $("plugin-head").replaceChildren(...cols.map((c) => el("th", c)));
  const tbody = $("plugins").tBodies[0]; tbody.replaceChildren();
  for (const p of list) {
    const tr = el("tr"); tr.dataset.plugin = p.name;
    tr.append(el("td", p.name, "room"));
    const st = el("td"); st.append(pill(p.status, "s-")); if (p.message) st.title = p.message; tr.append(st);
    if (hasIsolation) tr.append(el("td", p.isolation || "—"));
    tr.append(el("td", (p.hooks || []).join(", "), "muted"));
    tr.append(el("td", Number(p.calls).toLocaleString(), "num"), el("td", Number(p.failures).toLocaleString(), "num"));
    tr.append(el("td", p.meanMicroseconds === undefined ? "—" : p.meanMicroseconds.toFixed(1) + " µs", "num"));
    const act = el("td"); const b = el("button", "Reload");
    b.addEventListener("click", async () => {
      b.disabled = true;
      try { await api("/v1/plugins/" + encodeURIComponent(p.name) + "/reload", { method: "POST" }); $("plugin-note").textContent = p.name + " reloaded"; }
      catch (e) { $("plugin-note").textContent = "reload of " + p.name + " failed: " + e.message; }
      b.disabled = false; loadPlugins().catch(() => {});
    });
    act.append(b); tr.append(act); tbody.append(tr);
  }
  $("plugin-count").textContent = list.length + (list.length === 1 ? " plugin" : " plugins");
  if (list.length === 0) { const tr = el("tr"); const td = el("td", "no plugins loaded", "empty"); td.colSpan = cols.length; tr.append(td); tbody.append(tr); }
}

// ---- Live tail: Server-Sent Events read through fetch, so the token goes in a header.
// Lines are drawn once per animation frame (at most TAIL of them), so a burst
// of thousands of events costs one layout, not thousands.
function line(ev) {
  const div = el("div");
  const rest = Object.assign({}, ev); delete rest.ts; delete rest.event;
  div.append(el("span", new Date(ev.ts).toLocaleTimeString() + " "), el("span", ev.event, "ev"), el("span", " " + JSON.stringify(rest)));
  return div;
}

function showEvents(list) {
  if (list.length === 0) return;
  const tail = $("tail"), stick = tail.scrollTop + tail.clientHeight >= tail.scrollHeight - 4;
  tail.append(...list.slice(-TAIL).map(line));
  while (tail.childElementCount > TAIL) tail.firstElementChild.remove();
  if (stick) tail.scrollTop = tail.scrollHeight;
}

function keep(list, ev) { list.push(ev); if (list.length > TAIL) list.shift(); }

function flush() {
  state.frame = 0;
  const list = state.incoming; state.incoming = [];
  showEvents(list);
  $("event-count").textContent = state.seen.toLocaleString() + " since opened";
  if (state.pluginsStale) { state.pluginsStale = false; loadPlugins().catch(() => {}); }
}

function onEvent(raw) {
  let ev; try { ev = JSON.parse(raw); } catch { return; }
  state.seen++;
  if (ev.room) patchRoom(ev);
  if (ev.event === "plugin") state.pluginsStale = true;
  if (state.paused) {
    keep(state.held, ev);
    $("paused-info").textContent = state.held.length + " held while paused";
  } else keep(state.incoming, ev);
  if (!state.frame) state.frame = requestAnimationFrame(flush);
}

async function stream() {
  for (;;) {
    if (state.authFailed) { await new Promise((r) => setTimeout(r, 1000)); continue; }
    const ctl = new AbortController(); state.streamAbort = ctl;
    try {
      const res = await fetch("/v1/events/stream", { headers: headers(), signal: ctl.signal, cache: "no-store" });
      if (res.status === 401) { needToken("token needed"); continue; }
      if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
      $("live").textContent = "live"; $("live").className = "on";
      const reader = res.body.getReader(), dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const msg = buf.slice(0, cut); buf = buf.slice(cut + 2);
          const data = msg.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data) onEvent(data);
        }
      }
      throw new Error("stream ended");
    } catch (e) {
      if (state.authFailed) continue;
      $("live").textContent = "reconnecting"; $("live").className = "off";
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

async function refresh() {
  if (document.hidden || state.authFailed) return;
  try { await Promise.all([loadRooms(), loadPlugins()]); }
  catch (e) { if (e.message !== "401") $("updated").textContent = "refresh failed: " + e.message; }
}

$("pause").addEventListener("click", () => {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Resume" : "Pause";
  if (!state.paused) { showEvents(state.held); state.held = []; $("paused-info").textContent = ""; }
  else $("paused-info").textContent = "0 held while paused";
});
$("clear").addEventListener("click", () => { $("tail").replaceChildren(); state.held = []; state.incoming = []; });
let filterTimer = 0;
$("filter").addEventListener("input", () => {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(() => { state.filter = $("filter").value.trim(); state.offset = 0; refresh(); }, 200);
});
$("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); });
$("next").addEventListener("click", () => { state.offset += PAGE; refresh(); });
$("auth").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("roombot.controlToken", $("token").value);
  state.authFailed = false; $("auth").hidden = true; $("change-token").hidden = !TOKEN_REQUIRED;
  if (state.streamAbort) state.streamAbort.abort();
  refresh();
});
setInterval(() => { for (const row of state.rows.values()) row.cells.last.textContent = ago(row.lastEventTs); }, 1000);
setInterval(refresh, REFRESH_MS);
document.addEventListener("visibilitychange", refresh);
$("change-token").addEventListener("click", () => { $("auth").hidden = false; $("change-token").hidden = true; $("token").focus(); });
if (TOKEN_REQUIRED && !token()) needToken("token needed"); else { $("change-token").hidden = !TOKEN_REQUIRED; refresh(); }
stream();
</script>
</body>
</html>
"""#
}
