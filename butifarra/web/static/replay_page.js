/* The replay page: a list of the server's records (or of a file opened in the browser);
   the chosen record is replayed by the server (the engine checks every move) and shown
   with ButifarraReplay. #record=N in the address opens the server's record N. */
(function () {
  "use strict";
  var C = window.ButifarraCards;
  var PAGE = 50;
  var offset = 0, local = null, current = null;

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  var toastTimer = null;
  function toast(message) {
    var t = $("toast");
    t.textContent = message;
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { t.hidden = true; }, 7000);
  }
  function api(method, path, body) {
    var init = { method: method, headers: {} };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = body; }
    return fetch(path, init).then(function (r) {
      return r.json().catch(function () { return { error: r.status + " " + r.statusText }; })
        .then(function (data) {
          if (!r.ok) throw new Error(data.error || r.statusText);
          return data;
        });
    });
  }

  function describe(s) {
    if (s.in_play) return { head: "#" + s.index, body: "a deal a table is still playing: shown once that hand ends" };
    var bits = [];
    if (s.players) bits.push(s.players.join(" · "));
    var tags = [s.source, s.mode, s.role].filter(Boolean).join(" ");
    if (s.trump !== null && s.trump !== undefined) {
      bits.push((s.trump === 4 ? "butifarra" : C.SUITS[s.trump]) + " x" + s.multiplier +
        (s.scores ? ", score " + s.scores[0] + "–" + s.scores[1] : ""));
    }
    if (s.rules && s.rules.length) bits.push(s.rules.join(", "));
    if (s.has_probs) bits.push("with probabilities");
    return { head: "#" + s.index + (tags ? " " + tags : "") + (typeof s.deal === "number" ? " · deal " + s.deal : ""), body: bits.join("; ") };
  }

  function drawList(items, total, title) {
    $("list-title").textContent = title;
    var list = $("list");
    list.textContent = "";
    if (!items.length) list.appendChild(el("li", "bt-muted", "no records yet: play a hand first"));
    items.forEach(function (s) {
      var li = el("li");
      var b = el("button");
      b.type = "button";
      b.dataset.index = String(s.index);
      b.appendChild(el("b", null, describe(s).head));
      b.appendChild(el("div", "bt-muted", describe(s).body));
      b.disabled = !!s.in_play;
      b.addEventListener("click", function () { open(s.index); });
      if (current === s.index) b.setAttribute("aria-current", "true");
      li.appendChild(b);
      list.appendChild(li);
    });
    var pager = $("pager");
    pager.textContent = "";
    if (total > PAGE) {
      var prev = el("button", "bt-btn", "◀");
      prev.disabled = offset === 0;
      prev.addEventListener("click", function () { offset = Math.max(0, offset - PAGE); load(); });
      var next = el("button", "bt-btn", "▶");
      next.disabled = offset + PAGE >= total;
      next.addEventListener("click", function () { offset += PAGE; load(); });
      pager.appendChild(prev);
      pager.appendChild(el("span", "bt-muted", (offset + 1) + "–" + Math.min(total, offset + PAGE) + " of " + total));
      pager.appendChild(next);
    }
  }

  function load() {
    if (local) {
      var items = local.slice(offset, offset + PAGE).map(function (r, i) { return summary(offset + i, r); });
      drawList(items, local.length, local.name + " (" + local.length + ")");
      return;
    }
    api("GET", "/api/records?offset=" + offset + "&limit=" + PAGE).then(function (r) {
      drawList(r.records, r.total, "Records in " + r.file + " (" + r.total + ")");
    }).catch(function (e) { toast(e.message); });
  }

  function summary(i, r) {
    var res = r && r.result ? r.result : null;
    return {
      index: i, players: Array.isArray(r.players) ? r.players.map(String) : null,
      source: r.source ? String(r.source) : null, mode: r.mode ? String(r.mode) : null,
      role: r.role ? String(r.role) : null, deal: typeof r.deal === "number" ? r.deal : null,
      trump: res ? res.trump : null, multiplier: res ? res.multiplier : null,
      scores: res ? res.scores : null, has_probs: Array.isArray(r.probs),
    };
  }

  function show(data) {
    var viewer = $("viewer");
    window.ButifarraReplay.mount(viewer, data);
    viewer.focus({ preventScroll: true });
  }

  function open(index) {
    current = index;
    Array.prototype.forEach.call($("list").querySelectorAll("button[data-index]"), function (b) {
      if (b.dataset.index === String(index)) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    });
    var request = local ? api("POST", "/api/replay", JSON.stringify({ record: local[index] }))
      : api("GET", "/api/records/" + index);
    request.then(show).catch(function (e) { toast("Cannot show record #" + index + ": " + e.message); });
    if (!local) history.replaceState(null, "", "#record=" + index);
  }

  function openFile(file) {
    if (!file) return;
    file.text().then(function (text) {
      var records = [], bad = 0;
      text.split(/\r?\n/).forEach(function (line) {
        if (!line.trim()) return;
        try { records.push(JSON.parse(line)); } catch (e) { bad += 1; }
      });
      if (!records.length) { toast(file.name + ": no JSON lines found"); return; }
      local = records;
      local.name = file.name;
      offset = 0;
      current = null;
      if (bad) toast(bad + " line(s) of " + file.name + " are not JSON and were skipped");
      load();
      open(0);
    }).catch(function (e) { toast("Cannot read " + file.name + ": " + e.message); });
  }

  $("brand").insertBefore(C.icon(0), $("brand").firstChild);
  $("file").addEventListener("change", function (e) { openFile(e.target.files[0]); });
  load();
  var m = /record=(\d+)/.exec(window.location.hash);
  if (m) open(parseInt(m[1], 10));
})();
