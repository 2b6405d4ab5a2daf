/* The replay viewer: ButifarraReplay.mount(element, data) shows the frames that
   butifarra.web.replay.replay_data made (all four hands, the trick, the score, and the
   decision taken from each position, with the policy's probabilities when the record has
   them). Used by the served replay page and inlined, with cards.js, into Jupyter output. */
(function (root) {
  "use strict";
  var C = root.ButifarraCards;
  var POS = ["south", "east", "north", "west"];
  var DOUBLING = ["none", "contrar", "recontrar", "Sant Vicenç", "Verraca"];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function trumpText(t) {
    if (t === null || t === undefined) return "not chosen yet";
    return t === 4 ? "butifarra (no trump)" : C.SUITS[t];
  }

  function mount(host, data) {
    var bottom = typeof data.human_seat === "number" ? data.human_seat : 0;
    var n = data.frames.length - 1;
    var step = 0;
    function rel(s) { return (s - bottom + 4) % 4; }
    function who(s) { return data.players[s] + " (seat " + s + ")"; }
    function actionText(a) {
      return a < 48 ? C.longName(a) : (data.action_names[String(a)] || String(a));
    }
    function lastText(last) {  // the move in the server's words (butifarra_env.core.narration)
      return last.text || actionText(last.action);
    }

    host.textContent = "";
    host.classList.add("bt-replay");
    if (!host.hasAttribute("tabindex")) host.setAttribute("tabindex", "0");
    var layout = el("div", "bt-rp-layout");
    var table = el("div", "bt-table bt-rp-table");
    var seats = [], hands = [];
    for (var p = 0; p < 4; p++) {
      var seat = el("div", "bt-seat bt-pos-" + POS[p]);
      seats.push(seat);
      hands.push(null);
    }
    var center = el("div", "bt-center");
    var trick = el("div", "bt-trick");
    var slots = {};
    POS.forEach(function (pos) { slots[pos] = el("div", "bt-slot bt-pos-" + pos); trick.appendChild(slots[pos]); });
    var status = el("div", "bt-status");
    center.appendChild(trick);
    center.appendChild(status);
    table.appendChild(seats[2]);
    table.appendChild(seats[3]);
    table.appendChild(center);
    table.appendChild(seats[1]);
    table.appendChild(seats[0]);

    var side = el("aside", "bt-side");
    var ctl = el("div", "bt-box");
    ctl.appendChild(el("h3", null, data.title ? "Replay · " + data.title : "Replay"));
    var bar = el("div", "bt-rp-controls");
    function button(label, title, fn, name) {
      var b = el("button", "bt-btn", label);
      b.type = "button";
      b.title = title;
      b.dataset.step = name;
      b.addEventListener("click", fn);
      bar.appendChild(b);
      return b;
    }
    var bFirst = button("«", "first (Home)", function () { go(0); }, "first");
    var bPrev = button("◀", "back one move (←)", function () { go(step - 1); }, "prev");
    var bNext = button("▶", "forward one move (→)", function () { go(step + 1); }, "next");
    var bLast = button("»", "last (End)", function () { go(n); }, "last");
    var range = el("input");
    range.type = "range";
    range.min = "0";
    range.max = String(n);
    range.value = "0";
    range.setAttribute("aria-label", "move");
    range.addEventListener("input", function () { go(parseInt(range.value, 10)); });
    bar.appendChild(range);
    var counter = el("span", "bt-rp-step");
    bar.appendChild(counter);
    ctl.appendChild(bar);
    var moveText = el("div", "bt-rp-move");
    ctl.appendChild(moveText);
    side.appendChild(ctl);

    var decision = el("div", "bt-box");
    side.appendChild(decision);
    var contract = el("div", "bt-box");
    side.appendChild(contract);
    var score = el("div", "bt-box");
    side.appendChild(score);
    layout.appendChild(table);
    layout.appendChild(side);
    host.appendChild(layout);

    host.addEventListener("keydown", function (e) {
      var k = e.key;
      if (k === "ArrowRight") go(step + 1);
      else if (k === "ArrowLeft") go(step - 1);
      else if (k === "Home") go(0);
      else if (k === "End") go(n);
      else return;
      e.preventDefault();
    });

    function drawSeats(f) {
      var next = step < n ? data.frames[step + 1].last : null;
      for (var s = 0; s < 4; s++) {
        var box = seats[rel(s)];
        box.textContent = "";
        box.classList.toggle("bt-turn", f.to_move === s);
        var plate = el("div", "bt-plate bt-team-" + (((s - bottom) & 1) === 0 ? "us" : "them"));
        plate.appendChild(el("span", "bt-name", data.players[s]));
        plate.appendChild(el("span", "bt-role", "seat " + s + " · " + f.hands[s].length + " cards"));
        if (data.dealer === s) {
          var d = el("span", "bt-chip", "D");
          d.title = "dealer";
          plate.appendChild(d);
        }
        box.appendChild(plate);
        var hand = el("div", "bt-rp-hand");
        hand.dataset.seat = String(s);
        var legal = f.to_move === s && f.phase === "play" ? f.legal : [];
        f.hands[s].forEach(function (c) {
          var card = C.face(c, { size: "sm" });
          if (legal.length && legal.indexOf(c) < 0) card.style.opacity = "0.5";
          if (next && next.seat === s && next.action === c) card.classList.add("bt-just");
          hand.appendChild(card);
        });
        box.appendChild(hand);
        if (f.last && f.last.seat === s && f.last.action >= 48) {
          box.appendChild(el("div", "bt-bubble", lastText(f.last)));
        }
      }
    }

    function drawTrick(f) {
      for (var s = 0; s < 4; s++) {
        var c = f.trick[s];
        var slot = slots[POS[rel(s)]];
        var shown = slot.firstChild ? slot.firstChild.dataset.card : null;
        var want = c === null || c === undefined ? null : String(c);
        if (shown !== want) {  // redraw only what changed, so a card animates in once
          slot.textContent = "";
          if (want !== null) slot.appendChild(C.face(c, { size: "lg" }));
        }
        slot.classList.toggle("bt-winner", !!(f.trick_done && f.trick_done.winner === s));
      }
      var text = "";
      if (f.last) {
        text = who(f.last.seat) + ": " + lastText(f.last);
        if (f.trick_done) text += " — trick to " + data.players[f.trick_done.winner] + " (" + f.trick_done.points + " pts)";
      } else {
        text = "Dealt: " + who(data.dealer) + " deals";
      }
      status.textContent = text;
      moveText.textContent = step === n ? "End of the hand" : "Next: " + who(f.to_move) + " to move";
    }

    function drawDecision(f) {
      decision.textContent = "";
      if (step === n || f.to_move === null) {
        decision.appendChild(el("h3", null, "Result"));
        var r = data.result;
        if (r) {
          decision.appendChild(el("div", null, "Points: seats 0+2: " + r.team_points[0] + ", seats 1+3: " + r.team_points[1]));
          decision.appendChild(el("div", null, "Score: seats 0+2: " + r.scores[0] + ", seats 1+3: " + r.scores[1] + " (x" + r.multiplier + ")"));
        } else {
          decision.appendChild(el("div", "bt-muted", "the record ends before the hand does"));
        }
        return;
      }
      var chosen = data.frames[step + 1].last.action;
      decision.appendChild(el("h3", null, "Decision of " + who(f.to_move) + (f.probs ? " · policy probabilities" : " · legal moves")));
      var list = el("ul", "bt-probs");
      var items = f.legal.slice();
      if (f.probs) items.sort(function (a, b) { return (f.probs[String(b)] || 0) - (f.probs[String(a)] || 0); });
      items.forEach(function (a) {
        var li = el("li", a === chosen ? "bt-chosen" : null);
        li.dataset.action = String(a);
        li.appendChild(el("span", null, actionText(a)));
        var barBox = el("span", "bt-bar");
        var fill = el("span");
        var p = f.probs ? f.probs[String(a)] : null;
        fill.style.width = p === null || p === undefined ? "0%" : Math.round(100 * p) + "%";
        barBox.appendChild(fill);
        li.appendChild(barBox);
        li.appendChild(el("span", "bt-p", p === null || p === undefined ? (a === chosen ? "played" : "") : p.toFixed(3)));
        list.appendChild(li);
      });
      decision.appendChild(list);
      if (!f.probs) decision.appendChild(el("div", "bt-muted", "no probabilities recorded for this decision"));
    }

    function drawContract(f) {
      contract.textContent = "";
      contract.appendChild(el("h3", null, "Contract"));
      var dl = el("dl", "bt-kv");
      function kv(k, v) { dl.appendChild(el("dt", null, k)); dl.appendChild(el("dd", null, v)); }
      kv("Trump", trumpText(f.trump));
      if (f.chooser !== null) kv("Chosen by", who(f.chooser) + (f.delegated ? ", delegated" : ""));
      kv("Doubling", f.level ? DOUBLING[f.level] : "none");
      kv("Multiplier", f.multiplier_text || (f.multiplier ? "x" + f.multiplier : "—"));
      if (f.rules && f.rules.length) kv("Rules", f.rules.join(", "));
      contract.appendChild(dl);
      score.textContent = "";
      score.appendChild(el("h3", null, "Score"));
      var t = el("table", "bt-score");
      var head = el("tr");
      ["", "points", "tricks"].forEach(function (h) { head.appendChild(el("th", null, h)); });
      t.appendChild(head);
      [0, 1].forEach(function (team) {
        var tr = el("tr", team === (bottom & 1) ? "bt-us" : "bt-them");
        tr.appendChild(el("td", null, "seats " + team + "+" + (team + 2)));
        tr.appendChild(el("td", null, f.team_points[team]));
        tr.appendChild(el("td", null, f.team_tricks[team]));
        t.appendChild(tr);
      });
      score.appendChild(t);
      if (data.hand_number || data.match_scores[0] || data.match_scores[1]) {
        score.appendChild(el("div", "bt-muted", "Hand " + (data.hand_number + 1) + " of a match; before it: " +
          data.match_scores[0] + " – " + data.match_scores[1]));
      }
    }

    function go(k) {
      // a button that this step disables would drop the focus to the page (and the keys with
      // it): the viewer itself takes the focus instead, so Home/End/arrows keep working
      var active = document.activeElement;
      var hadFocus = active === host || host.contains(active);
      step = Math.max(0, Math.min(n, k));
      var f = data.frames[step];
      host.dataset.step = String(step);
      counter.textContent = step + " / " + n;
      range.value = String(step);
      bFirst.disabled = bPrev.disabled = step === 0;
      bNext.disabled = bLast.disabled = step === n;
      drawSeats(f);
      drawTrick(f);
      drawDecision(f);
      drawContract(f);
      active = document.activeElement;
      if (hadFocus && (!active || active.disabled || !(active === host || host.contains(active)))) {
        host.focus({ preventScroll: true });
      }
    }
    go(0);
    return { go: go, get step() { return step; } };
  }

  root.ButifarraReplay = { mount: mount };
})(window);
