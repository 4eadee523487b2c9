// The built book's own behaviour (added to every page by _config.yml's html_js_files):
// the sidebar buttons work on every window, wide figures open at their drawn size, and
// scrolled tables and formulas show that they scroll.
// Checked in a browser by tests/test_book_html.py.
(function () {
  "use strict";

  // pydata-sphinx-theme 0.17 renders its own ☰ buttons (.primary-toggle, .secondary-toggle)
  // in the hidden top navbar and wires only the first button of each class; the buttons a
  // reader sees are sphinx-book-theme's, later in the page, so they did nothing (upstream
  // pydata-sphinx-theme issue 2451, still open). A click on a later button is handed to the
  // first, whose handlers open the drawer on a narrow window and, through sphinx-book-theme,
  // collapse the left sidebar on a wide one.
  function wireSidebarToggles() {
    ["primary", "secondary"].forEach(function (kind) {
      var toggles = document.querySelectorAll("." + kind + "-toggle");
      var wired = toggles[0];
      Array.prototype.slice.call(toggles, 1).forEach(function (toggle) {
        // The theme gives the focus back to this button when its drawer closes, also after
        // a link in the drawer has scrolled the page to a heading. The button sits in the
        // sticky header, which Chromium scrolls back towards its place in the page when it
        // takes the focus: the button takes it without scrolling.
        var focus = toggle.focus;
        toggle.focus = function (options) {
          focus.call(toggle, Object.assign({}, options, { preventScroll: true }));
        };
        toggle.addEventListener(
          "click",
          function (event) {
            event.preventDefault();
            event.stopImmediatePropagation();
            // the focus stays on this button: the theme puts it into the drawer it opens and
            // gives it back to the button it finds focused when the drawer closes
            toggle.focus();
            wired.click();
          },
          true,
        );
      });
      // a link in the drawer (a page, or a heading of this page) closes it
      var dialog = document.getElementById("pst-" + kind + "-sidebar-modal");
      if (dialog) {
        dialog.addEventListener("click", function (event) {
          if (event.target.closest("a[href]")) dialog.close();
        });
      }
    });
  }

  // A figure shown much narrower than it was drawn opens at its drawn size on a click, in a
  // dialog that scrolls; a link opens the image file itself (all offline).
  var ZOOM_BELOW = 0.95;
  var viewer = null;

  function openViewer(img) {
    if (!viewer) {
      viewer = document.createElement("dialog");
      viewer.className = "lk-figure-viewer";
      viewer.innerHTML =
        '<div class="lk-figure-bar"><a class="lk-figure-file" target="_blank">在新标签页打开原图</a>' +
        '<button type="button" class="lk-figure-close" aria-label="关闭">✕ 关闭</button></div>' +
        '<div class="lk-figure-scroll"><img alt=""></div>';
      viewer.querySelector(".lk-figure-close").addEventListener("click", function () {
        viewer.close();
      });
      viewer.addEventListener("click", function (event) {
        if (event.target === viewer) viewer.close();
      });
      // Sphinx's sphinx_highlight.js swallows Escape, which would close a dialog by default
      viewer.addEventListener("keydown", function (event) {
        if (event.key === "Escape") viewer.close();
      });
      document.body.appendChild(viewer);
    }
    var big = viewer.querySelector(".lk-figure-scroll img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt;
    big.style.width = drawnWidth(img) + "px";
    viewer.querySelector(".lk-figure-file").href = img.currentSrc || img.src;
    viewer.showModal();
  }

  // The width a figure was drawn for: a sharp ("retina") figure has twice as many pixels and
  // states its width on the page in its width attribute (or style)
  function drawnWidth(img) {
    return parseFloat(img.getAttribute("width")) || parseFloat(img.style.width) || img.naturalWidth;
  }

  function markZoomable() {
    document.querySelectorAll(".bd-article img").forEach(function (img) {
      if (!img.naturalWidth || img.closest(".lk-figure-viewer")) return;
      var shrunk = img.clientWidth < ZOOM_BELOW * drawnWidth(img);
      img.classList.toggle("lk-zoomable", shrunk);
      if (shrunk) {
        img.title = "点击放大（原图 " + Math.round(drawnWidth(img)) + " 像素宽）";
        img.tabIndex = 0;
      } else {
        img.removeAttribute("title");
        img.removeAttribute("tabindex");
      }
    });
  }

  function watchFigures() {
    document.addEventListener("click", function (event) {
      var img = event.target.closest && event.target.closest("img.lk-zoomable");
      if (img) {
        // a 2x figure sits in a link to its file (Sphinx links a resized image): stay here
        event.preventDefault();
        openViewer(img);
      }
    });
    document.addEventListener("keydown", function (event) {
      var img = event.target.closest && event.target.closest("img.lk-zoomable");
      if (img && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        openViewer(img);
      }
    });
    window.addEventListener("resize", markZoomable);
    // a figure's shown width also changes without a window resize (fonts, math and the
    // scroll boxes settling the layout): watch the figures themselves
    var sized = window.ResizeObserver ? new ResizeObserver(markZoomable) : null;
    document.querySelectorAll(".bd-article img").forEach(function (img) {
      img.addEventListener("load", markZoomable);
      if (sized) sized.observe(img);
    });
    markZoomable();
  }

  // Tables, printed outputs and formulas wider than the column scroll sideways (book.css);
  // this marks the ones that do, so a shadow and a line under them say so. A table that
  // Sphinx left without a scrolling box (a printed DataFrame) gets one first.
  var SCROLLERS = ".bd-article .pst-scrollable-table-container, .bd-article .table-wrapper," +
    " .bd-article .lk-table-scroll, .bd-article .cell_output pre," +
    " .bd-article mjx-container[display='true'], .bd-article div.math," +
    " .bd-article span.math.lk-wide-math, .bd-article div.cell_input pre";

  // The exercise checker's printed words (lecturekit.exercises): a statement, ❌, 💡, ✅
  var FEEDBACK = /(^|\n)(❌|💡|✅)|^练习 [\w.]+（第/;

  function markFeedback() {
    document.querySelectorAll(".bd-article .cell_output pre").forEach(function (pre) {
      if (FEEDBACK.test(pre.textContent)) pre.classList.add("lk-feedback");
    });
  }

  function wrapBareTables() {
    document.querySelectorAll(".bd-article table").forEach(function (table) {
      var parent = table.parentElement;
      if (parent.matches(".pst-scrollable-table-container, .table-wrapper, .lk-table-scroll")) {
        return;
      }
      var box = document.createElement("div");
      box.className = "lk-table-scroll";
      parent.insertBefore(box, table);
      box.appendChild(table);
    });
  }

  function markScrollers() {
    // an inline formula wider than its span (the theme clips it there) scrolls instead
    document.querySelectorAll(".bd-article span.math").forEach(function (span) {
      var math = span.querySelector("mjx-math");
      if (!math) return;
      span.classList.toggle(
        "lk-wide-math", math.getBoundingClientRect().width > span.clientWidth + 1
      );
    });
    document.querySelectorAll(SCROLLERS).forEach(function (box) {
      box.classList.toggle("lk-scrolls", box.scrollWidth > box.clientWidth + 1);
    });
  }

  function watchScrollers() {
    markFeedback();
    wrapBareTables();
    window.addEventListener("resize", markScrollers);
    markScrollers();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(markScrollers);
    }
  }

  // Tooltips that Sphinx, pydata-sphinx-theme and myst-nb write in English under zh_CN
  // (the theme's own words are translated at build time, book/_ext/theme_zh.py).
  var WORDS = {
    "Link to this heading": "本标题的链接",
    "Toggle hidden content": "展开或收起",
    "Color mode": "配色",
    "System Settings": "跟随系统",
    "Copy to clipboard": "复制",
  };

  function translateTooltips() {
    ["title", "aria-label", "data-bs-original-title", "data-tooltip"].forEach(function (name) {
      document.querySelectorAll("[" + name + "]").forEach(function (element) {
        var words = WORDS[element.getAttribute(name)];
        if (words) element.setAttribute(name, words);
      });
    });
  }

  function start() {
    translateTooltips();
    wireSidebarToggles();
    watchFigures();
    watchScrollers();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  window.addEventListener("load", function () {
    markZoomable();
    markScrollers();
  });
})();
