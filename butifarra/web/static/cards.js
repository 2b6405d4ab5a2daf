/* Spanish-deck cards drawn in the page: suit icons (inline SVG), faces, backs and names.
   Display only: which card is legal always comes from the server (the engine's mask).
   Card id = suit * 12 + number - 1; suits: oros, copas, espadas, bastos. */
(function (root) {
  "use strict";
  var SUITS = ["oros", "copas", "espadas", "bastos"];
  var SUIT_EN = ["coins", "cups", "swords", "clubs"];
  var NAMES = { 1: "as", 9: "manilla", 10: "sota", 11: "caballo", 12: "rey" };
  var ICONS = [
    // oros: a gold coin
    '<circle cx="20" cy="20" r="16" fill="#f2c230" stroke="#9a6b00" stroke-width="2"/>' +
      '<circle cx="20" cy="20" r="10" fill="none" stroke="#9a6b00" stroke-width="1.6"/>' +
      '<circle cx="20" cy="20" r="4" fill="#c98f00"/>',
    // copas: a red cup
    '<path d="M8 6h24c0 11-4.5 17-12 17S8 17 8 6z" fill="#d23a3a" stroke="#7d1414" stroke-width="1.6"/>' +
      '<rect x="17.5" y="23" width="5" height="7" fill="#e0a030" stroke="#7d1414" stroke-width="1"/>' +
      '<path d="M11 36h18l-3-6H14z" fill="#e0a030" stroke="#7d1414" stroke-width="1.4"/>',
    // espadas: a blue sword
    '<path d="M20 2l3.5 5v21h-7V7z" fill="#cfd9e6" stroke="#1d4f91" stroke-width="1.6"/>' +
      '<rect x="9" y="27" width="22" height="4" rx="1.5" fill="#1d4f91"/>' +
      '<rect x="18" y="31" width="4" height="6" fill="#8a5a2b"/>' +
      '<circle cx="20" cy="38" r="2" fill="#1d4f91"/>',
    // bastos: a green club
    '<path d="M15.5 37L13 9c-.5-6 14.5-6 14 0l-2.5 28z" fill="#5b9a3c" stroke="#2d5a1a" stroke-width="1.6"/>' +
      '<circle cx="16.5" cy="16" r="1.8" fill="#2d5a1a"/><circle cx="23" cy="22" r="1.8" fill="#2d5a1a"/>' +
      '<circle cx="17.5" cy="29" r="1.6" fill="#2d5a1a"/>',
  ];

  function suitOf(id) { return Math.floor(id / 12); }
  function numberOf(id) { return (id % 12) + 1; }
  function longName(id) {
    var n = numberOf(id);
    return (NAMES[n] || String(n)) + " de " + SUITS[suitOf(id)];
  }
  function shortName(id) { return numberOf(id) + " " + SUITS[suitOf(id)]; }

  function icon(suit, cls) {
    var span = document.createElement("span");
    span.className = "bt-suit-icon " + (cls || "");
    span.innerHTML = '<svg viewBox="0 0 40 40" aria-hidden="true" focusable="false">' +
      ICONS[suit] + "</svg>";
    return span;
  }

  /* A card face. opts.tag: "button" for a playable card; opts.size: "sm" | "md" | "lg". */
  function face(id, opts) {
    opts = opts || {};
    var el = document.createElement(opts.tag || "div");
    var suit = suitOf(id), n = numberOf(id);
    el.className = "bt-card bt-" + SUITS[suit] + " bt-" + (opts.size || "md");
    el.dataset.card = String(id);
    el.title = longName(id) + " (" + n + " of " + SUIT_EN[suit] + ")";
    el.setAttribute("aria-label", longName(id));
    if (opts.tag === "button") el.type = "button";
    var num = document.createElement("span");
    num.className = "bt-num";
    num.textContent = String(n);
    var fig = document.createElement("span");
    fig.className = "bt-fig";
    fig.textContent = NAMES[n] || "";
    var name = document.createElement("span");
    name.className = "bt-suit-name";
    name.textContent = SUITS[suit];
    el.appendChild(num);
    el.appendChild(icon(suit, "bt-big"));
    el.appendChild(name);
    el.appendChild(fig);
    return el;
  }

  function back(size) {
    var el = document.createElement("div");
    el.className = "bt-card bt-back bt-" + (size || "sm");
    el.setAttribute("aria-hidden", "true");
    return el;
  }

  root.ButifarraCards = {
    SUITS: SUITS, NAMES: NAMES, suitOf: suitOf, numberOf: numberOf,
    longName: longName, shortName: shortName, icon: icon, face: face, back: back,
  };
})(window);
