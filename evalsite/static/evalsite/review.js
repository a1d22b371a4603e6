/* Evalsite: the review queues' keyboard (templates/evals/review.html: a run's queue and a set's
 * queue across its runs).
 *
 * j / k      next / previous case; unsaved changes (a verdict, axis scores or a comment alone) are
 *            saved first (the form posts with go=next|prev and the server answers the next case
 *            only once the review is stored)
 * p / f / u  verdict pass / fail / unsure: saved, then the next case, in one keystroke (the form
 *            posts with go=next; the server answers the next case, or the end of the queue, only
 *            once the review is stored, with "saved" on the panel and in the aria-live region
 *            #review-live); k then comes back to it, even when the filter has dropped it
 * 1-5, 0     score of the highlighted axis, then the next axis is highlighted; a  next axis
 * c          comment box (Esc leaves it, Ctrl+Enter saves)
 * ?          help overlay
 * Keys are ignored while typing in a field. Loaded as a static file (the CSP forbids inline
 * scripts); safe to load twice (htmx navigation).
 */
(function () {
  "use strict";
  if (window.evalsiteReviewKeys) { return; }
  window.evalsiteReviewKeys = true;
  var activeAxis = 0;
  // a save or a move in flight: keys that would act on the case being left wait for its answer
  // (a second verdict typed before the next case arrives would otherwise overwrite the first)
  var busy = false;

  function panel() { return document.getElementById("review-panel"); }
  function form() { return document.getElementById("review-form"); }
  function canReview() { var p = panel(); return p && p.dataset.canReview === "1" && form(); }

  function markAxis() {
    var rows = document.querySelectorAll("#review-form .axis-row");
    for (var i = 0; i < rows.length; i++) { rows[i].classList.toggle("active", i === activeAxis); }
  }

  function submit(go) {
    var f = form();
    f.querySelector("input[name=go]").value = go || "";
    f.dataset.dirty = "";
    busy = true;
    // htmx binds a swapped-in form only when the swap settles (~20 ms later): a key pressed in
    // between would post the form natively and leave the page. Bind it now (a no-op once bound).
    htmx.process(f);
    f.requestSubmit();
  }

  function move(direction) {
    var p = panel();
    if (!p) { return; }
    var f = form();
    if (f && f.dataset.dirty === "1") {
      // a verdict, axis scores or a comment alone: saved (and confirmed) before moving on; an
      // emptied form is refused on screen rather than dropped silently
      submit(direction > 0 ? "next" : "prev");
      return;
    }
    var url = direction > 0 ? p.dataset.nextUrl : p.dataset.previousUrl;
    if (url) {
      busy = true;
      htmx.ajax("GET", url, { target: "#review-panel", swap: "outerHTML" }).then(function () {
        history.pushState({}, "", url);
      });
    }
  }

  function typing(target) {
    var tag = (target && target.tagName) || "";
    return tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target.type !== "radio");
  }

  document.addEventListener("input", function (event) {
    var f = form();
    if (f && f.contains(event.target)) { f.dataset.dirty = "1"; }
  });

  document.addEventListener("htmx:afterSwap", function () { busy = false; activeAxis = 0; markAxis(); });
  ["htmx:afterRequest", "htmx:responseError", "htmx:sendError", "htmx:timeout"].forEach(function (name) {
    document.addEventListener(name, function () { busy = false; });
  });

  document.addEventListener("keydown", function (event) {
    if (!panel() || event.altKey || event.metaKey) { return; }
    var target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") { target.blur(); }
      if (event.key === "Enter" && event.ctrlKey && form()) { event.preventDefault(); submit(""); }
      return;
    }
    if (event.ctrlKey) { return; }
    var key = event.key;
    var help = document.getElementById("review-help");
    if (key === "?") { if (help) { help.hidden = !help.hidden; } event.preventDefault(); return; }
    if (key === "Escape" && help) { help.hidden = true; return; }
    if (busy && "jkpfu0123456789ac".indexOf(key) >= 0) { event.preventDefault(); return; }
    if (key === "j") { move(1); event.preventDefault(); return; }
    if (key === "k") { move(-1); event.preventDefault(); return; }
    if (!canReview()) { return; }
    var f = form();
    var verdicts = { p: "pass", f: "fail", u: "unsure" };
    if (verdicts[key]) {
      var radio = f.querySelector("input[name=verdict][value=" + verdicts[key] + "]");
      if (radio) { radio.checked = true; submit("next"); }
      event.preventDefault();
      return;
    }
    var rows = f.querySelectorAll(".axis-row input");
    if (/^[0-5]$/.test(key) && rows.length) {
      rows[activeAxis].value = key;
      f.dataset.dirty = "1";
      activeAxis = (activeAxis + 1) % rows.length;
      markAxis();
      event.preventDefault();
      return;
    }
    if (key === "a" && rows.length) { activeAxis = (activeAxis + 1) % rows.length; markAxis(); event.preventDefault(); return; }
    if (key === "c") { var box = f.querySelector("textarea[name=comment]"); if (box) { box.focus(); event.preventDefault(); } }
  });

  document.addEventListener("DOMContentLoaded", markAxis);
  markAxis();
})();
