/* Evalsite trace viewer: the span tree (table.tv-tree, an ARIA treegrid) and its detail pane.
 *
 * Without this file every row is a link (?span=<id>#span-<id>) the server renders. With it:
 *   click / Enter       select the span: its detail is fetched as the page's "span-detail" partial
 *                       and the URL becomes ?span=<id>#span-<id> (a link to it)
 *   Up / Down           move through the visible spans (Home / End: first / last)
 *   Right               unfold a folded span, else go to its first child
 *   Left                fold an unfolded span, else go to its parent
 *   click on the arrow  fold / unfold
 * Opening a URL with #span-<id> (or changing the hash) selects that span. One focusable row at a
 * time (roving tabindex), so Tab leaves the tree in one step. The file is safe to load twice and
 * works after htmx swaps the page (it listens on the document).
 */
(function () {
  "use strict";
  if (window.evalsiteTraceViewer) { return; }
  window.evalsiteTraceViewer = true;

  var loading = 0;

  function grid() { return document.querySelector("table.tv-tree"); }
  function level(row) { return parseInt(row.getAttribute("aria-level"), 10) || 1; }
  function rowOf(node) { return node && node.closest ? node.closest("table.tv-tree tbody tr") : null; }
  function rowById(id) {
    var row = document.getElementById("span-" + id);
    return row && row.tagName === "TR" ? row : null;
  }

  function nextVisible(row, step) {
    var next = step > 0 ? row.nextElementSibling : row.previousElementSibling;
    while (next && next.hidden) { next = step > 0 ? next.nextElementSibling : next.previousElementSibling; }
    return next;
  }

  function parentRow(row) {
    var want = level(row) - 1;
    for (var r = row.previousElementSibling; r; r = r.previousElementSibling) {
      if (level(r) === want) { return r; }
    }
    return null;
  }

  function setExpanded(row, open) {
    if (!row.hasAttribute("aria-expanded")) { return; }
    row.setAttribute("aria-expanded", open ? "true" : "false");
    var base = level(row);
    var foldedAt = 0; // a folded descendant hides its own subtree even when this row opens
    for (var r = row.nextElementSibling; r && level(r) > base; r = r.nextElementSibling) {
      var l = level(r);
      if (!open) { r.hidden = true; continue; }
      if (foldedAt && l > foldedAt) { r.hidden = true; continue; }
      foldedAt = 0;
      r.hidden = false;
      if (r.getAttribute("aria-expanded") === "false") { foldedAt = l; }
    }
  }

  function reveal(row) {
    var folded = [];
    for (var p = parentRow(row); p; p = parentRow(p)) {
      if (p.getAttribute("aria-expanded") === "false") { folded.push(p); }
    }
    for (var i = folded.length - 1; i >= 0; i--) { setExpanded(folded[i], true); }
  }

  function focusRow(row) {
    var table = grid();
    if (!table || !row) { return; }
    var current = table.querySelector("tbody tr[tabindex='0']");
    if (current && current !== row) { current.setAttribute("tabindex", "-1"); }
    row.setAttribute("tabindex", "0");
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
  }

  function spanUrl(id) { return window.location.pathname + "?span=" + encodeURIComponent(id); }

  function select(row, fetchDetail) {
    var table = grid();
    if (!table || !row) { return; }
    var id = row.getAttribute("data-span");
    var old = table.querySelector("tbody tr[aria-selected='true']");
    if (old && old !== row) { old.setAttribute("aria-selected", "false"); }
    row.setAttribute("aria-selected", "true");
    reveal(row);
    history.replaceState(history.state, "", spanUrl(id) + "#span-" + id);
    var pane = document.getElementById("span-detail");
    var title = document.getElementById("span-detail-title");
    if (!fetchDetail || !pane || (title && title.getAttribute("data-span") === id)) { return; }
    var ticket = ++loading;
    pane.setAttribute("aria-busy", "true");
    fetch(spanUrl(id), { headers: { "HX-Request": "true", "HX-Target": "span-detail" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        if (ticket !== loading) { return; } // a later selection won
        pane.innerHTML = html;
        pane.removeAttribute("aria-busy");
      })
      .catch(function () {
        if (ticket === loading) { window.location.assign(spanUrl(id) + "#span-" + id); }
      });
  }

  function fromHash() {
    var hash = window.location.hash;
    if (hash.indexOf("#span-") !== 0) { return; }
    var row = rowById(decodeURIComponent(hash.slice(6)));
    if (!row) { return; }
    select(row, true);
    focusRow(row);
  }

  function init() {
    var table = grid();
    if (!table || table.getAttribute("data-ready")) { return; }
    table.setAttribute("data-ready", "true");
    // the rows take keyboard focus; their links stay for no-JS use, out of the Tab order
    var links = table.querySelectorAll("tbody a");
    for (var i = 0; i < links.length; i++) { links[i].setAttribute("tabindex", "-1"); }
    fromHash();
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    var pathLink = target.closest && target.closest("#span-detail a[data-span]");
    if (pathLink) {
      var to = rowById(pathLink.getAttribute("data-span"));
      if (to) { event.preventDefault(); select(to, true); focusRow(to); }
      return;
    }
    var row = rowOf(target);
    if (!row || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) { return; }
    event.preventDefault();
    if (target.closest(".tv-toggle")) {
      setExpanded(row, row.getAttribute("aria-expanded") !== "true");
      focusRow(row);
      return;
    }
    select(row, true);
    focusRow(row);
  });

  document.addEventListener("keydown", function (event) {
    var row = rowOf(event.target);
    if (!row || event.target !== row || event.altKey || event.ctrlKey || event.metaKey) { return; }
    var to = null;
    switch (event.key) {
      case "ArrowDown": to = nextVisible(row, 1); break;
      case "ArrowUp": to = nextVisible(row, -1); break;
      case "Home": to = row.parentNode.firstElementChild; break;
      case "End":
        to = row.parentNode.lastElementChild;
        if (to && to.hidden) { to = nextVisible(to, -1); }
        break;
      case "ArrowRight":
        if (row.getAttribute("aria-expanded") === "false") { setExpanded(row, true); to = row; }
        else if (row.getAttribute("aria-expanded") === "true") { to = nextVisible(row, 1); }
        else { to = row; }
        break;
      case "ArrowLeft":
        if (row.getAttribute("aria-expanded") === "true") { setExpanded(row, false); to = row; }
        else { to = parentRow(row) || row; }
        break;
      case "Enter":
      case " ":
        select(row, true);
        to = row;
        break;
      default:
        return;
    }
    event.preventDefault();
    event.stopPropagation();
    if (to) { focusRow(to); }
  });

  window.addEventListener("hashchange", fromHash);
  document.addEventListener("htmx:afterSettle", init);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
