// Arbiter dashboard: small progressive enhancements on top of htmx.

// --- Copy buttons -------------------------------------------------------------
// A button with data-copy="ID" copies the value of the field ID (a new API
// key, a webhook secret); one with data-copy-text copies that text (an
// action's key, id or JSON). They are hidden in the markup so that without
// JavaScript nobody sees a dead button. The button says "Copied", or
// "Select and copy" where the browser refuses.
(function () {
  var copy = "button[data-copy], button[data-copy-text]";
  function enableCopyButtons() {
    document.querySelectorAll(copy).forEach(function (b) {
      if (navigator.clipboard) b.hidden = false;
    });
  }
  document.addEventListener("DOMContentLoaded", enableCopyButtons);
  document.addEventListener("htmx:afterSettle", enableCopyButtons);
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest(copy);
    if (!b) return;
    var text = b.dataset.copyText;
    if (text === undefined) {
      var field = document.getElementById(b.dataset.copy);
      if (!field) return;
      text = field.value;
    }
    var label = b.textContent;
    var said = function (words) {
      b.textContent = words;
      if (b.dataset.copyText !== undefined) setTimeout(function () { b.textContent = label; }, 2000);
    };
    navigator.clipboard.writeText(text).then(function () { said("Copied"); }, function () { said("Select and copy"); });
  });
  document.addEventListener("focusin", function (ev) {
    if (ev.target.matches && ev.target.matches("input[data-select-on-focus]")) ev.target.select();
  });
})();

// --- Refused steps ------------------------------------------------------------
// htmx leaves 4xx answers unswapped. A form inside [data-swap-refusals] whose
// step is refused (the bulk bar's 400 invalid, 404 no such namespace, 409 too
// many matched) gets back the fragment saying why, so it is swapped in like a
// success. A whole page (an error page) is never swapped into a part of one.
// The decision panel's refusals come as 200 with the panel (web/action_pages.go).
document.addEventListener("htmx:beforeSwap", function (evt) {
  var status = evt.detail.xhr.status;
  var elt = evt.detail.requestConfig && evt.detail.requestConfig.elt;
  var refusal = status === 400 || status === 403 || status === 404 || status === 409 ||
      status === 422 || status === 503;
  var page = /^\s*<!doctype/i.test(evt.detail.serverResponse || "");
  if (refusal && !page && elt && elt.closest && elt.closest("[data-swap-refusals]")) {
    evt.detail.shouldSwap = true;
    evt.detail.isError = false;
  }
});

// --- Bulk decisions: tick every row --------------------------------------
// The header's box ticks or clears every row's box of the bulk bar; it is
// hidden in the markup, since without JavaScript it could do nothing.
(function () {
  function showPickAll() {
    document.querySelectorAll("input[data-pick-all]").forEach(function (b) { b.hidden = false; });
  }
  document.addEventListener("DOMContentLoaded", showPickAll);
  document.addEventListener("htmx:afterSettle", showPickAll);
  document.addEventListener("change", function (ev) {
    var all = ev.target;
    if (!all.matches || !all.matches("input[data-pick-all]")) return;
    var table = all.closest("table");
    if (!table) return;
    table.querySelectorAll('input[name="ids"][form="bulk-form"]').forEach(function (b) { b.checked = all.checked; });
  });
})();

// --- Bulk decisions: the bar waits until rows are ticked -----------------
// The queue comes first: the bar shows one line until a row is ticked (or
// the operator asks to decide on every one matched), then opens with a
// live count of the rows ticked. Without JavaScript the bar is always open.
(function () {
  function boxes() {
    return document.querySelectorAll('input[name="ids"][form="bulk-form"]:checked').length;
  }
  function update() {
    var form = document.getElementById("bulk-form");
    if (!form) return;
    var n = boxes();
    var all = form.querySelector('input[name="scope"][value="all"]');
    var open = n > 0 || (all && all.checked) || form.dataset.opened === "1";
    form.classList.toggle("bulk-idle", !open);
    var hint = form.querySelector("[data-bulk-hint]");
    if (hint) hint.hidden = false;
    var count = form.querySelector("[data-bulk-count]");
    if (count) {
      count.hidden = n === 0;
      count.textContent = n === 1 ? "· 1 row ticked" : "· " + n + " rows ticked";
    }
  }
  document.addEventListener("DOMContentLoaded", update);
  document.addEventListener("htmx:afterSettle", update); // rows come and go with live updates
  document.addEventListener("change", update);
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("[data-bulk-open]");
    if (!b) return;
    var form = b.closest("form");
    var all = form.querySelector('input[name="scope"][value="all"]');
    if (all) all.checked = true;
    form.dataset.opened = "1";
    update();
    var decision = form.querySelector("select[name=decision]");
    if (decision) decision.focus();
  });
})();

// --- Relative times stay current -------------------------------------------
// Each [data-rel] element says how long ago its datetime was, counted from
// the server's time when it was drawn (data-now) plus the time since the
// browser first saw it: the browser's own clock may be wrong, its passing
// is not. The words are those of views/time.go (timeRel).
(function () {
  function words(ms) {
    var ahead = ms < 0, d = Math.abs(ms) / 1000, s;
    if (d < 5) return "just now";
    if (d < 60) s = Math.floor(d) + " s";
    else if (d < 3600) s = Math.floor(d / 60) + " min";
    else if (d < 48 * 3600) s = Math.floor(d / 3600) + " h";
    else s = Math.floor(d / 86400) + " d";
    return ahead ? "in " + s : s + " ago";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-rel][data-now]").forEach(function (el) {
      if (!el.arbiterSeen) el.arbiterSeen = now;
      var server = Date.parse(el.dataset.now) + (now - el.arbiterSeen);
      var t = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(server) && !isNaN(t)) el.textContent = words(server - t);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 5000); });
  document.addEventListener("htmx:afterSettle", tick);
})();

// --- Keyboard -----------------------------------------------------------------
// j/k move through the rows of the queue or the list (the row's key link
// takes the focus, so Enter opens it), x ticks the row, / searches, and on
// an action a, r and c open approve, retry and compensate, d goes to the
// panel; ? lists them. Nothing fires while the person types in a field, or
// with Ctrl, Alt or Meta held.
(function () {
  var rowSel = '[data-testid="triage-row"], [data-testid="action-row"]';
  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }
  function current(rows) {
    for (var i = 0; i < rows.length; i++) if (rows[i].classList.contains("kbd-current")) return i;
    return -1;
  }
  function move(by) {
    var rows = document.querySelectorAll(rowSel);
    if (!rows.length) return;
    var i = current(rows);
    var next = i < 0 ? (by > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, i + by));
    if (i >= 0) rows[i].classList.remove("kbd-current");
    rows[next].classList.add("kbd-current");
    var link = rows[next].querySelector('a[data-testid="triage-key"], a[data-testid="row-key"]');
    if (link) link.focus();
  }
  function tick() {
    var rows = document.querySelectorAll(rowSel);
    var i = current(rows);
    if (i < 0) return;
    var box = rows[i].querySelector('input[name="ids"]');
    if (!box) return;
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
  }
  function decision(name) {
    var d = document.querySelector('details[data-decision="' + name + '"]');
    if (!d) return false;
    d.open = true;
    var field = d.querySelector("textarea, input:not([type=hidden])");
    (field || d.querySelector("summary")).focus();
    return true;
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
    var help = document.getElementById("keyboard-help");
    if (help && help.open) return; // the dialog has the keyboard; Escape closes it
    var done = true;
    switch (ev.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "x": tick(); break;
      case "/":
        var q = document.getElementById("f-q");
        if (q) q.focus(); else window.location.assign("/actions#search");
        break;
      case "a": done = decision("approve"); break;
      case "r": done = decision("retry"); break;
      case "c": done = decision("compensate"); break;
      case "d":
        var panel = document.querySelector('[data-testid="decision-panel"] summary, [data-testid="decision-panel"]');
        if (panel) { if (!panel.hasAttribute("tabindex") && panel.tagName !== "SUMMARY") panel.setAttribute("tabindex", "-1"); panel.focus(); } else done = false;
        break;
      case "?": if (help && help.showModal) help.showModal(); else done = false; break;
      default: done = false;
    }
    if (done) {
      ev.preventDefault();
      swallow = ev.key;
    }
  });
  // A shortcut that moved the focus into a field must not also type its
  // letter there: a browser that sends the key's character after all (as
  // some input methods do) has it dropped once.
  var swallow = null;
  document.addEventListener("keypress", function (ev) {
    if (swallow !== null && ev.key === swallow) ev.preventDefault();
    swallow = null;
  }, true);
  document.addEventListener("keyup", function () { swallow = null; });
  document.addEventListener("DOMContentLoaded", function () {
    if (window.location.hash === "#search") {
      var q = document.getElementById("f-q");
      if (q) q.focus();
    }
  });
})();
