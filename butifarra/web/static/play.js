/* The play page: talks to the JSON API, draws the table, animates the bots' moves.
   The server decides everything (legal moves, bots, scores); this file only shows it.
   The game id lives in localStorage, so a reload picks the game up where it was.
   ?pause=MS sets the pause between shown moves (default 550). */
(function () {
  "use strict";
  var C = window.ButifarraCards;
  var POS = ["south", "east", "north", "west"];
  var ROLE = ["you", "right opponent", "partner", "left opponent"];
  var STORE_GAME = "butifarra.game";
  var STORE_SETUP = "butifarra.setup";
  var BID_KEYS = { o: 48, c: 49, e: 50, b: 51, u: 52, d: 53, x: 54, p: 55 };
  var MODE_NAMES = { hand: "One hand at a time", match: "Match to 101", duplicate: "Fair comparison" };
  var params = new URLSearchParams(window.location.search);
  var PAUSE = clampInt(params.get("pause"), 550, 0, 3000);

  var cfg = null, gid = null, view = null, busy = false;

  function $(id) { return document.getElementById(id); }
  function clampInt(text, dflt, lo, hi) {
    var v = parseInt(text, 10);
    if (isNaN(v)) return dflt;
    return Math.max(lo, Math.min(hi, v));
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }
  function storage(key, value) {
    try {
      if (value === undefined) return window.localStorage.getItem(key);
      if (value === null) window.localStorage.removeItem(key);
      else window.localStorage.setItem(key, value);
    } catch (e) { /* storage may be off: the game then lasts until the page closes */ }
    return null;
  }
  function signed(x) { return (x > 0 ? "+" : "") + x; }

  var toastTimer = null;
  function toast(message) {
    var t = $("toast");
    t.textContent = message;
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { t.hidden = true; }, 6000);
  }

  function api(method, path, body) {
    var init = { method: method, headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (r) {
      return r.json().catch(function () { return { error: r.status + " " + r.statusText }; })
        .then(function (data) {
          if (!r.ok) {
            var err = new Error(data.error || r.statusText);
            err.status = r.status;
            throw err;
          }
          return data;
        });
    });
  }

  // ---------------------------------------------------------------- names
  function me() { return view.setup.seat; }
  function rel(seat) { return (seat - me() + 4) % 4; }
  function team(seat) { return ((seat - me()) & 1) === 0 ? "us" : "them"; }
  function seatName(seat) {
    return seat === me() ? "You" : view.players[seat] + " (" + ROLE[rel(seat)] + ")";
  }
  function trumpText(trump) {
    if (trump === null || trump === undefined) return "not chosen yet";
    if (trump === 4) return "butifarra (no trump)";
    return C.SUITS[trump];
  }

  // ---------------------------------------------------------------- setup
  function fillSetup() {
    var saved = {};
    try { saved = JSON.parse(storage(STORE_SETUP) || "{}") || {}; } catch (e) { saved = {}; }
    var form = $("setup-form");
    Array.prototype.forEach.call(form.querySelectorAll("select.bt-agent"), function (sel) {
      sel.textContent = "";
      cfg.agents.forEach(function (a) { sel.appendChild(new Option(a, a)); });
      var want = saved[sel.name] || (cfg.agents.indexOf("rule") >= 0 ? "rule" : cfg.agents[0]);
      if (cfg.agents.indexOf(want) >= 0) sel.value = want;
    });
    if (saved.mode) {
      var radio = form.querySelector('input[name="mode"][value="' + saved.mode + '"]');
      if (radio) radio.checked = true;
    }
    if (saved.seat !== undefined) form.seat.value = String(saved.seat);
    form.obligada.checked = saved.obligada === true;
    form.linear_doubling.checked = saved.linear_doubling === true;
    var cap = saved.butifarra_max_doubling_level;
    form.butifarra_max_doubling_level.value = cap === undefined || cap === null ? "" : String(cap);
    if (form.butifarra_max_doubling_level.selectedIndex < 0) form.butifarra_max_doubling_level.value = "";
    $("records-help").textContent = "Every finished hand is saved to " + cfg.records + ".";
    toggleBotField();
  }
  function toggleBotField() {
    var mode = $("setup-form").querySelector('input[name="mode"]:checked').value;
    $("bot-field").hidden = mode !== "duplicate";
  }
  function showSetup() {
    $("setup").hidden = false;
    $("game").hidden = true;
    $("new-game").hidden = true;
    $("back-to-game").hidden = !(gid && view);
    $("mode-label").textContent = "";
    var first = $("setup-form").querySelector('input[name="mode"]:checked');
    if (first) first.focus();
  }
  function startGame(ev) {
    ev.preventDefault();
    if (busy) return;
    var f = $("setup-form");
    var mode = f.querySelector('input[name="mode"]:checked').value;
    var cap = f.butifarra_max_doubling_level.value;
    var body = {
      mode: mode, seat: parseInt(f.seat.value, 10), partner: f.partner.value,
      opponents: [f.right.value, f.left.value], bot: f.bot.value,
      obligada: f.obligada.checked, linear_doubling: f.linear_doubling.checked,
      butifarra_max_doubling_level: cap === "" ? null : parseInt(cap, 10),
    };
    storage(STORE_SETUP, JSON.stringify({
      mode: mode, seat: body.seat, partner: body.partner, right: f.right.value,
      left: f.left.value, bot: body.bot, obligada: body.obligada,
      linear_doubling: body.linear_doubling,
      butifarra_max_doubling_level: body.butifarra_max_doubling_level,
    }));
    busy = true;
    var old = gid;
    var done = old ? api("DELETE", "/api/games/" + old).catch(function () { return null; })
      : Promise.resolve(null);
    done.then(function () { return api("POST", "/api/games", body); })
      .then(function (r) {
        gid = r.id;
        storage(STORE_GAME, gid);
        busy = false;
        showGame(r.view);
        return play(r.events || [], r.view);
      })
      .catch(function (e) { busy = false; toast(e.message); });
  }

  // ---------------------------------------------------------------- moves
  function showGame(v) {
    view = v;
    $("setup").hidden = true;
    $("game").hidden = false;
    $("new-game").hidden = false;
    render(v, v, null);
  }

  async function play(events, final) {
    busy = true;
    try {
      for (var i = 0; i < events.length; i++) {
        var ev = events[i];
        render(final, ev.state, ev);
        await sleep(ev.seat === final.setup.seat ? PAUSE * 0.4 : PAUSE);
        if (ev.trick_done) await sleep(PAUSE * 1.6);
      }
    } finally {
      view = final;
      busy = false;
      render(final, final, null);
    }
  }

  function send(path, body) {
    if (busy || !gid) return;
    busy = true;
    render(view, view, null);
    api("POST", "/api/games/" + gid + path, body)
      .then(function (r) { return play(r.events, r.view); })
      .catch(function (e) {
        busy = false;
        toast(e.message);
        if (e.status === 404) { lost(); return; }
        return refresh();
      });
  }
  function act(action) {
    if (!view || view.legal.indexOf(action) < 0) return;
    send("/act", { action: action, at: view.n_actions });
  }
  function nextHand() { if (view && view.over) send("/next", {}); }
  function refresh() {
    return api("GET", "/api/games/" + gid).then(function (r) { view = r.view; render(view, view, null); })
      .catch(function (e) { if (e.status === 404) lost(); else toast(e.message); });
  }
  function lost() {
    storage(STORE_GAME, null);
    gid = null;
    view = null;
    showSetup();
  }

  // ---------------------------------------------------------------- drawing
  function render(v, pub, ev) {
    view = view || v;
    var table = $("table");
    var myTurn = !busy && !v.over && v.to_move === v.setup.seat;
    table.dataset.phase = pub.phase;
    table.dataset.busy = busy ? "1" : "0";
    table.dataset.over = v.over && !busy ? "1" : "0";
    table.dataset.nActions = String(pub.n_actions);
    table.dataset.toMove = String(pub.to_move);
    table.dataset.deal = String(v.deal);
    $("mode-label").textContent = MODE_NAMES[v.setup.mode] + " · deal " + (v.deal + 1);
    for (var s = 0; s < 4; s++) drawSeat(v, pub, ev, s);
    drawTrick(v, pub, ev);
    drawStatus(v, pub, ev, myTurn);
    drawBids(v, myTurn);
    drawHand(v, myTurn);
    drawSide(v, pub, ev);
    drawResult(v);
  }

  function drawSeat(v, pub, ev, seat) {
    var box = $("seat-" + POS[rel(seat)]);
    box.textContent = "";
    box.classList.toggle("bt-turn", pub.to_move === seat && pub.phase !== "hand_over");
    var plate = el("div", "bt-plate bt-team-" + team(seat));
    plate.appendChild(el("span", "bt-name", seat === me() ? "You" : v.players[seat]));
    plate.appendChild(el("span", "bt-role", ROLE[rel(seat)] + " · seat " + seat));
    if (pub.dealer === seat) {
      var d = el("span", "bt-chip", "D");
      d.title = "dealer";
      plate.appendChild(d);
    }
    box.appendChild(plate);
    if (seat !== me()) {
      var backs = el("div", "bt-backs");
      backs.setAttribute("aria-label", pub.counts[seat] + " cards");
      for (var i = 0; i < pub.counts[seat]; i++) backs.appendChild(C.back("sm"));
      box.appendChild(backs);
    }
    if (ev && ev.seat === seat && ev.action >= 48) {
      box.appendChild(el("div", "bt-bubble", ev.text));
    }
  }

  function drawTrick(v, pub, ev) {
    for (var s = 0; s < 4; s++) {
      var card = pub.trick[s];
      var slot = $("trick").querySelector(".bt-slot.bt-pos-" + POS[rel(s)]);
      var shown = slot.firstChild ? slot.firstChild.dataset.card : null;
      var want = card === null || card === undefined ? null : String(card);
      if (shown !== want) {  // redraw only what changed, so a card animates in once
        slot.textContent = "";
        if (want !== null) slot.appendChild(C.face(card, { size: "lg" }));
      }
      slot.classList.toggle("bt-winner", !!(ev && ev.trick_done && ev.trick_done.winner === s));
    }
  }

  function drawStatus(v, pub, ev, myTurn) {
    var text = "";
    if (ev) {
      text = (ev.seat === me() ? "You" : v.players[ev.seat]) + ": " + ev.text;
      if (ev.trick_done) {
        text += " — trick to " + (ev.trick_done.winner === me() ? "you" : seatName(ev.trick_done.winner)) +
          " (" + ev.trick_done.points + " points)";
      }
    } else if (busy) {
      text = "…";
    } else if (v.over) {
      text = "Hand over";
    } else if (myTurn) {
      if (v.phase === "choose_trump") text = "You deal: choose trump, butifarra, or delegate";
      else if (v.phase === "choose_trump_delegated") text = "Your partner delegated: you choose";
      else if (v.phase === "doubling") text = "Trump is " + trumpText(v.trump) + ": double or pass?";
      else text = v.trick.some(function (c) { return c !== null; }) ? "Your turn: play a card" : "Your lead";
    } else {
      text = seatName(v.to_move) + " to move";
    }
    $("status").textContent = text;
  }

  function bidLabel(v, a) {
    if (a >= 48 && a <= 51) return { text: C.SUITS[a - 48], key: "OCEB"[a - 48], suit: a - 48 };
    if (a === 52) return { text: "Butifarra (x" + v.butifarra_multiplier + ")", key: "U" };
    if (a === 53) return { text: "Delegate to partner", key: "D" };
    if (a === 54) {
      var raised = v.next_multiplier !== null && v.next_multiplier !== undefined ? v.next_multiplier : v.multiplier * 2;
      return { text: (v.next_double || "double") + " (x" + raised + ")", key: "X" };
    }
    return { text: "Pass (bé)", key: "P" };
  }

  function drawBids(v, myTurn) {
    var bar = $("bids");
    bar.textContent = "";
    if (!myTurn || v.phase === "play") return;
    v.legal.forEach(function (a) {
      var info = bidLabel(v, a);
      var b = el("button", "bt-btn" + (a === 54 ? " bt-primary" : ""));
      b.type = "button";
      b.dataset.action = String(a);
      if (info.suit !== undefined) b.appendChild(C.icon(info.suit));
      b.appendChild(document.createTextNode(info.text));
      b.appendChild(el("kbd", null, info.key));
      b.addEventListener("click", function () { act(a); });
      bar.appendChild(b);
    });
  }

  function drawHand(v, myTurn) {
    var hand = $("hand");
    var focused = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.card : undefined;
    hand.textContent = "";
    var playing = myTurn && v.phase === "play";
    hand.classList.toggle("bt-my-turn", playing);
    var firstLegal = null, refocus = null;
    v.hand.forEach(function (c) {
      var b = C.face(c, { tag: "button", size: "lg" });
      var legal = playing && v.legal.indexOf(c) >= 0;
      b.disabled = !legal;
      if (legal) {
        b.classList.add("bt-legal");
        b.addEventListener("click", function () { act(c); });
        if (firstLegal === null) firstLegal = b;
        if (String(c) === focused) refocus = b;
      }
      hand.appendChild(b);
    });
    if (playing && (refocus || firstLegal)) (refocus || firstLegal).focus({ preventScroll: true });
  }

  function row(table, cls, cells, head) {
    var tr = el("tr", cls);
    cells.forEach(function (c) { tr.appendChild(el(head ? "th" : "td", null, c)); });
    table.appendChild(tr);
  }

  function drawSide(v, pub, ev) {
    var us = me() & 1, them = 1 - us;
    var dl = $("contract");
    dl.textContent = "";
    function kv(k, val) {
      dl.appendChild(el("dt", null, k));
      var dd = el("dd");
      if (val instanceof Node) dd.appendChild(val); else dd.textContent = val;
      dl.appendChild(dd);
    }
    kv("Dealer", seatName(pub.dealer));
    var t = el("span");
    if (pub.trump !== null && pub.trump < 4) t.appendChild(C.icon(pub.trump));
    t.appendChild(document.createTextNode(" " + trumpText(pub.trump)));
    kv("Trump", t);
    if (pub.chooser !== null) kv("Chosen by", seatName(pub.chooser) + (pub.delegated ? ", delegated" : ""));
    kv("Doubling", pub.level_name || "none");
    kv("Multiplier", pub.multiplier_text || (pub.multiplier ? "x" + pub.multiplier : "—"));
    if (pub.rules && pub.rules.length) kv("Rules", pub.rules.join(", "));

    var score = $("score");
    score.textContent = "";
    var head = el("thead");
    row(head, null, ["", "points", "tricks"], true);
    score.appendChild(head);
    var body = el("tbody");
    row(body, "bt-us", ["Us", pub.team_points[us], pub.team_tricks[us]]);
    row(body, "bt-them", ["Them", pub.team_points[them], pub.team_tricks[them]]);
    score.appendChild(body);

    $("match-box").hidden = !v.match;
    if (v.match) {
      var m = $("match");
      m.textContent = "";
      var mb = el("tbody");
      row(mb, "bt-us", ["Us", v.match.scores[us] + " / " + v.match.target]);
      row(mb, "bt-them", ["Them", v.match.scores[them] + " / " + v.match.target]);
      m.appendChild(mb);
    }

    $("dup-box").hidden = !v.duplicate;
    if (v.duplicate) drawDuplicate(v.duplicate);

    var lt = $("last-trick");
    lt.textContent = "";
    var last = ev && ev.trick_done ? { cards: ev.state.trick, winner: ev.trick_done.winner, leader: ev.state.trick_leader }
      : v.tricks[v.tricks.length - 1];
    if (last) {
      for (var k = 0; k < 4; k++) {
        var s = (last.leader + k) % 4;
        var c = C.face(last.cards[s], { size: "sm" });
        c.title = seatName(s) + ": " + C.longName(last.cards[s]) + (s === last.winner ? " (won)" : "");
        if (s === last.winner) c.classList.add("bt-just");
        lt.appendChild(c);
      }
      lt.appendChild(el("span", "bt-muted", "won by " + (last.winner === me() ? "you" : v.players[last.winner])));
    } else {
      lt.appendChild(el("span", "bt-muted", "no trick yet"));
    }

    var log = $("log");
    log.textContent = "";
    v.log.forEach(function (e) {
      var li = el("li");
      li.appendChild(el("b", null, (e.seat === me() ? "You" : v.players[e.seat] + " (" + e.seat + ")") + ": "));
      li.appendChild(document.createTextNode(e.text));
      log.appendChild(li);
    });
    log.scrollTop = log.scrollHeight;
  }

  function drawDuplicate(d) {
    var box = $("dup");
    box.textContent = "";
    box.appendChild(el("div", null, "You vs " + d.bot + " in your seat, same deals"));
    var kv = el("dl", "bt-kv");
    function add(k, val, cls) {
      kv.appendChild(el("dt", null, k));
      kv.appendChild(el("dd", cls, val));
    }
    add("Deals", d.n);
    if (d.last) add("Last deal", signed(d.last.delta) + " (you " + signed(d.last.human) + ", bot " + signed(d.last.bot) + ")",
      d.last.delta >= 0 ? "bt-pos" : "bt-neg");
    add("Mean", d.mean === null ? "—" : signed(d.mean.toFixed(2)), d.mean === null ? null : (d.mean >= 0 ? "bt-pos" : "bt-neg"));
    add("95% CI", d.lo === null ? "needs 2 deals" : "[" + d.lo.toFixed(1) + ", " + d.hi.toFixed(1) + "]");
    box.appendChild(kv);
    if (d.deltas.length) {
      var bars = el("div", "bt-deltas");
      var peak = Math.max.apply(null, d.deltas.map(Math.abs)) || 1;
      d.deltas.slice(-40).forEach(function (x) {
        var b = el("span", x < 0 ? "bt-neg-bar" : null);
        b.style.height = Math.max(4, Math.round(100 * Math.abs(x) / peak)) + "%";
        b.title = signed(x);
        bars.appendChild(b);
      });
      box.appendChild(bars);
    }
  }

  function drawResult(v) {
    var box = $("result");
    box.textContent = "";
    box.hidden = !(v.over && !busy);
    if (box.hidden) return;
    var r = v.result;
    var us = me() & 1, them = 1 - us;
    var mine = r.rewards[me()];
    box.appendChild(el("h2", null, "Hand over"));
    box.appendChild(el("p", null, "Points (cards + 1 per trick): us " + r.team_points[us] +
      ", them " + r.team_points[them]));
    box.appendChild(el("p", null, "Contract: " + trumpText(r.trump) + " by " + seatName(r.chooser) +
      (r.doubling_level ? ", " + v.level_name : "") + ", " + (v.multiplier_text || "x" + r.multiplier) +
      (v.rules && v.rules.length ? " (" + v.rules.join(", ") + ")" : "")));
    box.appendChild(el("p", "bt-big-delta " + (mine > 0 ? "bt-pos" : mine < 0 ? "bt-neg" : ""),
      mine > 0 ? "We score " + mine : mine < 0 ? "They score " + (-mine) : "No score (36–36)"));
    if (v.duplicate && v.duplicate.last) {
      var d = v.duplicate.last;
      box.appendChild(el("p", null, v.duplicate.bot + " in your seat on this deal: " + signed(d.bot) +
        "; you − bot = " + signed(d.delta)));
    }
    if (v.match) {
      var m = v.match;
      box.appendChild(el("p", null, "Match: us " + m.scores[us] + ", them " + m.scores[them] + " (to " + m.target + ")"));
      if (m.winner !== null) box.appendChild(el("p", "bt-big-delta", m.winner === us ? "We win the match!" : "They win the match"));
    }
    box.appendChild(el("p", "bt-muted", "Saved: " + v.saved + " record" + (v.saved === 1 ? "" : "s") + " in " + cfg.records));
    var b = el("button", "bt-btn bt-primary");
    b.type = "button";
    b.id = "next-hand";
    b.appendChild(document.createTextNode(v.match && v.match.winner !== null ? "New match" : "Next hand"));
    b.appendChild(el("kbd", null, "N"));
    b.addEventListener("click", nextHand);
    box.appendChild(b);
    if (document.activeElement === document.body || !document.activeElement) b.focus({ preventScroll: true });
  }

  // ---------------------------------------------------------------- keys
  function onKey(e) {
    if (!view || $("game").hidden || busy || e.ctrlKey || e.metaKey || e.altKey) return;
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    var key = e.key.toLowerCase();
    if (key === "arrowleft" || key === "arrowright") {
      var cards = Array.prototype.slice.call($("hand").querySelectorAll("button.bt-card:not(:disabled)"));
      if (!cards.length) return;
      var i = cards.indexOf(document.activeElement);
      var j = i < 0 ? 0 : (i + (key === "arrowright" ? 1 : cards.length - 1)) % cards.length;
      cards[j].focus();
      e.preventDefault();
      return;
    }
    if (key === "n" && view.over) { nextHand(); e.preventDefault(); return; }
    if (BID_KEYS.hasOwnProperty(key) && view.phase !== "play" && view.legal.indexOf(BID_KEYS[key]) >= 0) {
      act(BID_KEYS[key]);
      e.preventDefault();
    }
  }

  // ---------------------------------------------------------------- start
  function init() {
    $("brand").insertBefore(C.icon(0), $("brand").firstChild);
    $("setup-form").addEventListener("submit", startGame);
    $("setup-form").addEventListener("change", toggleBotField);
    $("new-game").addEventListener("click", showSetup);
    $("back-to-game").addEventListener("click", function () { if (view) showGame(view); });
    document.addEventListener("keydown", onKey);
    api("GET", "/api/config").then(function (c) {
      cfg = c;
      fillSetup();
      gid = storage(STORE_GAME);
      if (!gid) { showSetup(); return; }
      return api("GET", "/api/games/" + gid).then(function (r) { showGame(r.view); })
        .catch(function (e) {
          if (e.status === 404 || e.status === 400) {
            storage(STORE_GAME, null);
            gid = null;
            toast("Your last game is no longer on the server: start a new one.");
          } else {
            toast(e.message);
          }
          showSetup();
        });
    }).catch(function (e) { toast("Cannot reach the server: " + e.message); });
  }
  init();
})();
