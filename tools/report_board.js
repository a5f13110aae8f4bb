/* report_board.js - the shogi board of tools/report's page: the games
 * embedded in the page (KOMA_GAMES, written by tools/report_games.c) drawn as
 * SVG, stepped with the buttons or the keyboard.
 *
 * Owns: replaying a game's USI moves on a board (no legality checks: report
 * replayed each record with the engine and cut it at a move that did not
 * replay), the board, hands, value line, search moves and move list.
 * Does not own: which games are embedded, nor any figure (report_games.c).
 * Embedded into the page by tools/report.cmake (report_board_js.h); no
 * external script, font or request. Keys: Left/Right a move, Home/End,
 * PageUp/PageDown ten moves, Up/Down the previous/next game, L letters.
 * The URL (?game=ID&move=N&letters=1, or the same after #) selects a game and
 * a move (links, and the browser test). */
(function () {
  'use strict';
  var D = window.KOMA_GAMES;
  var root = document.getElementById('kb');
  if (!D || !root || !D.games.length) return;
  var KAN = {P: '歩', L: '香', N: '桂', S: '銀', B: '角', R: '飛', G: '金', K: '玉',
    '+P': 'と', '+L': '杏', '+N': '圭', '+S': '全', '+B': '馬', '+R': '龍'};
  var ZEN = '１２３４５６７８９', KNUM = '一二三四五六七八九', RANKS = 'abcdefghi';
  var HORDER = 'RBGSNLP', NS = document.getElementById('kboard').namespaceURI; /* SVG's, from the page */
  var CELL = 40, BX = 20, BY = 58;
  var st = {g: 0, n: 0, letters: false, pos: []};

  function $(id) { return document.getElementById(id); }
  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* A position: b[square] = 'P' (Black) / 'p' (White), '+' before a promoted
   * piece; h.b / h.w: counts by upper-case letter; side 'b' or 'w'. */
  function parseSfen(s) {
    if (s === 'startpos') s = 'lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1';
    var f = s.split(' '), rows = f[0].split('/'), b = {}, h = {b: {}, w: {}};
    for (var r = 0; r < 9 && r < rows.length; r++) {
      var file = 9, prom = '';
      for (var i = 0; i < rows[r].length; i++) {
        var ch = rows[r][i];
        if (ch === '+') prom = '+';
        else if (ch >= '1' && ch <= '9') file -= +ch;
        else { b[file + RANKS[r]] = prom + ch; prom = ''; file--; }
      }
    }
    var n = 0;
    if (f[2] && f[2] !== '-')
      for (var j = 0; j < f[2].length; j++) {
        var c = f[2][j];
        if (c >= '0' && c <= '9') { n = n * 10 + +c; continue; }
        var side = c === c.toUpperCase() ? 'b' : 'w', t = c.toUpperCase();
        h[side][t] = (h[side][t] || 0) + (n || 1);
        n = 0;
      }
    return {b: b, h: h, side: f[1] === 'w' ? 'w' : 'b', last: null};
  }

  function apply(p, u) {
    var q = {b: Object.assign({}, p.b), h: {b: Object.assign({}, p.h.b), w: Object.assign({}, p.h.w)},
      side: p.side === 'b' ? 'w' : 'b', last: {from: null, to: u.substr(2, 2)}};
    var s = p.side, t;
    if (u[1] === '*') {
      t = u[0];
      q.h[s][t] = (q.h[s][t] || 1) - 1;
      if (!q.h[s][t]) delete q.h[s][t];
      q.b[u.substr(2, 2)] = s === 'b' ? t : t.toLowerCase();
    } else {
      var from = u.substr(0, 2), to = u.substr(2, 2), pc = q.b[from] || '', cap = q.b[to];
      delete q.b[from];
      if (cap) {
        t = cap.replace('+', '').toUpperCase();
        q.h[s][t] = (q.h[s][t] || 0) + 1;
      }
      q.b[to] = u[4] === '+' ? '+' + pc : pc;
      q.last.from = from;
    }
    return q;
  }

  function game() { return D.games[st.g]; }
  function moves(g) { return g.m ? g.m.split(' ') : []; }
  function kind(pc) { return pc.replace(/[a-z]/, function (c) { return c.toUpperCase(); }); }
  function isWhite(pc) { return pc !== kind(pc); }
  function pieceName(pc) { var k = kind(pc); return st.letters ? (isWhite(pc) ? pc : k) : KAN[k]; }
  function sqName(sq) { return st.letters ? sq : ZEN[+sq[0] - 1] + KNUM[RANKS.indexOf(sq[1])]; }

  /* A move as it is written: KIF's "▲７六歩(77)" with kanji, "P7g-7f" with letters. */
  function moveText(p, u, prevTo) {
    var mark = p.side === 'b' ? '▲' : '△', to = u.substr(2, 2);
    if (u[1] === '*') return st.letters ? u[0] + '*' + to : mark + sqName(to) + KAN[u[0]] + '打';
    var pc = p.b[u.substr(0, 2)] || '?', cap = p.b[to], prom = u[4] === '+';
    if (st.letters) return kind(pc) + u.substr(0, 2) + (cap ? 'x' : '-') + to + (prom ? '+' : '');
    var dest = to === prevTo ? '同' : sqName(to);
    return mark + dest + (KAN[kind(pc)] || '?') + (prom ? '成' : '') + '(' + u.substr(0, 2).replace(/[a-i]/,
      function (c) { return RANKS.indexOf(c) + 1; }) + ')';
  }

  function positions(g) {
    var out = [parseSfen(g.s)], ms = moves(g);
    for (var i = 0; i < ms.length; i++) out.push(apply(out[i], ms[i]));
    return out;
  }

  /* ---- the board -------------------------------------------------------------------- */
  function drawPiece(svg, pc, x, y) {
    var w = isWhite(pc), cx = x + CELL / 2, cy = y + CELL / 2, k = kind(pc);
    var g = el('g', w && !st.letters ? {transform: 'rotate(180 ' + cx + ' ' + cy + ')'} : {});
    var pts = w && st.letters
      ? [[20, 36], [32, 30], [35, 4], [5, 4], [8, 30]]
      : [[20, 4], [32, 10], [35, 36], [5, 36], [8, 10]];
    var outline = pts.map(function (a) { return (x + a[0]) + ',' + (y + a[1]); }).join(' ');
    g.appendChild(el('polygon', {'class': 'kp', points: outline}));
    var t = el('text', {x: cx, y: cy + (st.letters ? 5 : 7),
      'class': 'kt' + (k[0] === '+' ? ' kpr' : '') + (st.letters ? ' kl' : '')},
      pieceName(pc));
    g.appendChild(t);
    svg.appendChild(g);
  }

  function handText(h) {
    var parts = [];
    for (var i = 0; i < HORDER.length; i++) {
      var t = HORDER[i], n = h[t] || 0;
      if (n) parts.push((st.letters ? t : KAN[t]) + (n > 1 ? n : ''));
    }
    return parts;
  }

  function drawHand(svg, h, side, x, y, anchor) {
    var parts = handText(h);
    var name = side === 'b' ? (st.letters ? 'Black' : '☗先手') : (st.letters ? 'White' : '☖後手');
    var keys = [];
    for (var i = 0; i < HORDER.length; i++) if (h[HORDER[i]]) keys.push(HORDER[i] + h[HORDER[i]]);
    var g = el('g', {id: 'hand-' + side, 'data-hand': keys.join(' ')});
    g.appendChild(el('text', {x: x, y: y, 'class': 'kh', 'text-anchor': anchor},
      name + '  ' + (parts.length ? parts.join(' ') : (st.letters ? '-' : 'なし'))));
    svg.appendChild(g);
  }

  function drawBoard(p) {
    var svg = $('kboard');
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.appendChild(el('rect', {x: BX, y: BY, width: 9 * CELL, height: 9 * CELL, 'class': 'kbg'}));
    for (var f = 9; f >= 1; f--) {
      svg.appendChild(el('text', {x: BX + (9 - f) * CELL + CELL / 2, y: BY - 6, 'class': 'kc'},
        st.letters ? '' + f : ZEN[f - 1]));
    }
    for (var r = 0; r < 9; r++) {
      svg.appendChild(el('text', {x: BX + 9 * CELL + 12, y: BY + r * CELL + CELL / 2 + 5, 'class': 'kc'},
        st.letters ? RANKS[r] : KNUM[r]));
      for (var f2 = 9; f2 >= 1; f2--) {
        var sq = f2 + RANKS[r], x = BX + (9 - f2) * CELL, y = BY + r * CELL, pc = p.b[sq];
        var a = {'data-sq': sq};
        if (pc) a['data-p'] = pc;
        var g = el('g', a);
        var cls = 'ksq';
        if (p.last && p.last.to === sq) cls += ' kto';
        else if (p.last && p.last.from === sq) cls += ' kfrom';
        g.appendChild(el('rect', {x: x, y: y, width: CELL, height: CELL, 'class': cls}));
        svg.appendChild(g);
        if (pc) drawPiece(g, pc, x, y);
      }
    }
    for (var i = 1; i <= 2; i++)
      for (var j = 1; j <= 2; j++)
        svg.appendChild(el('circle', {cx: BX + 3 * i * CELL, cy: BY + 3 * j * CELL, r: 2.5, 'class': 'kdot'}));
    drawHand(svg, p.h.w, 'w', BX, 24, 'start');
    drawHand(svg, p.h.b, 'b', BX + 9 * CELL, BY + 9 * CELL + 30, 'end');
    svg.setAttribute('data-side', p.side);
  }

  /* ---- the value line: Black's win probability by ply ---------------------------------- */
  /* Black's win probability at position i: one character a position, VALUES[k] = k / 63 (report_games.c:
   * value_char), '.' none. */
  var VALUES = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  function valueAt(g, i) {
    var k = g.v && i < g.v.length ? VALUES.indexOf(g.v[i]) : -1;
    return k < 0 ? null : k / 63;
  }

  function drawValue(g) {
    var svg = $('kval'), W = 420, H = 150, L = 34, R = 8, T = 10, B = 24, n = moves(g).length;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var px = function (i) { return L + (n ? i / n : 0) * (W - L - R); };
    var py = function (v) { return T + (1 - v) * (H - T - B); };
    svg.appendChild(el('rect', {x: L, y: T, width: W - L - R, height: H - T - B, 'class': 'kvbg'}));
    [0, 0.5, 1].forEach(function (v) {
      svg.appendChild(el('line', {x1: L, x2: W - R, y1: py(v), y2: py(v), 'class': v === 0.5 ? 'kvmid' : 'kvgrid'}));
      svg.appendChild(el('text', {x: L - 4, y: py(v) + 4, 'class': 'kvt', 'text-anchor': 'end'},
        Math.round(v * 100) + '%'));
    });
    svg.appendChild(el('text', {x: L, y: H - 6, 'class': 'kvt'},
      'Black\'s win probability by ply (root value of the search)'));
    var seg = [], known = 0;
    var flush = function () {
      if (seg.length > 1) svg.appendChild(el('polyline', {points: seg.join(' '), 'class': 'kvl'}));
      else if (seg.length === 1) {
        var a = seg[0].split(',');
        svg.appendChild(el('circle', {cx: a[0], cy: a[1], r: 1.5, 'class': 'kvd'}));
      }
      seg = [];
    };
    for (var i = 0; i <= n; i++) {
      var v = valueAt(g, i);
      if (v === null) { flush(); continue; }
      known++;
      seg.push(px(i).toFixed(1) + ',' + py(v).toFixed(1));
    }
    flush();
    if (!known)
      svg.appendChild(el('text', {x: (L + W - R) / 2, y: py(0.75), 'class': 'kvt', 'text-anchor': 'middle'},
        !g.nv ? 'no values stored' : g.nv.length > 60 ? 'no values stored for this game (see below)' : g.nv));
    svg.appendChild(el('line', {x1: px(st.n), x2: px(st.n), y1: T, y2: H - B, 'class': 'kvcur', id: 'kvcur'}));
    svg.onclick = function (ev) {
      var r = svg.getBoundingClientRect(), x = (ev.clientX - r.left) * W / r.width;
      go(Math.round((x - L) / (W - L - R) * n));
    };
  }

  /* ---- text beside the board ---------------------------------------------------------- */
  function topMoves(g, p) {
    var box = $('ktop'), ms = moves(g), rows = g.t || [];
    box.textContent = '';
    var v = valueAt(g, st.n), head = document.createElement('div');
    head.textContent = v === null ? 'no search value stored at this position'
      : 'Black ' + Math.round(v * 100) + '% (search value at this position, ' +
        (p.side === 'b' ? 'Black' : 'White') + ' to move)';
    box.appendChild(head);
    for (var i = 0; i < rows.length; i++) {
      if (rows[i][0] !== st.n) continue;
      var t = document.createElement('div');
      t.textContent = D.share + ':';
      box.appendChild(t);
      for (var j = 1; j + 1 < rows[i].length; j += 2) {
        var d = document.createElement('div'), u = rows[i][j];
        d.className = 'ktm' + (u === ms[st.n] ? ' kplayed' : '');
        d.textContent = moveText(p, u, st.n ? (ms[st.n - 1] || '').substr(2, 2) : null) + '  ' + rows[i][j + 1] + '%' +
          (u === ms[st.n] ? '  (played)' : '');
        box.appendChild(d);
      }
      return;
    }
    if (st.n < ms.length) {
      var none = document.createElement('div');
      none.className = 'kmuted';
      none.textContent = g.t || g.v ? 'no policy target stored at this position (a fast search, or none)'
        : (g.nv || 'no search stored for this game');
      box.appendChild(none);
    }
  }

  function moveList(g) {
    var box = $('kmoves'), ms = moves(g);
    box.textContent = '';
    for (var i = 0; i < ms.length; i++) {
      var s = document.createElement('span');
      s.textContent = (i + 1) + '.' + moveText(st.pos[i], ms[i], i ? ms[i - 1].substr(2, 2) : null);
      s.setAttribute('data-ply', i + 1);
      s.onclick = function () { go(+this.getAttribute('data-ply')); };
      box.appendChild(s);
      box.appendChild(document.createTextNode(' '));
    }
  }

  function info(g) {
    var ms = moves(g), p = st.pos[st.n], txt;
    if (st.n === 0) txt = 'start position';
    else txt = 'move ' + st.n + ': ' +
      moveText(st.pos[st.n - 1], ms[st.n - 1], st.n > 1 ? ms[st.n - 2].substr(2, 2) : null);
    txt += ' · ' + st.n + '/' + ms.length;
    if (st.n === ms.length) txt += ' · ' + g.end;
    else txt += ' · ' + (p.side === 'b' ? 'Black' : 'White') + ' to move';
    $('kmove').textContent = txt;
    var spans = $('kmoves').children;
    for (var i = 0; i < spans.length; i++) {
      spans[i].className = i + 1 === st.n ? 'kcur' : '';
      if (i + 1 === st.n) { /* keep the current move in view inside the list (never scroll the page) */
        var box = $('kmoves'), top = spans[i].offsetTop;
        if (top < box.scrollTop || top > box.scrollTop + box.clientHeight - 20)
          box.scrollTop = top - box.clientHeight / 2;
      }
    }
  }

  function draw() {
    var g = game();
    drawBoard(st.pos[st.n]);
    topMoves(g, st.pos[st.n]);
    info(g);
    var c = $('kvcur'), n = moves(g).length;
    if (c) { var x = 34 + (n ? st.n / n : 0) * (420 - 42); c.setAttribute('x1', x); c.setAttribute('x2', x); }
    root.setAttribute('data-game', g.id);
    root.setAttribute('data-move', st.n);
    try { /* the link to this position (a reload keeps it) */
      history.replaceState(null, '', '#game=' + g.id + '&move=' + st.n + (st.letters ? '&letters=1' : ''));
    } catch (e) { /* file: URLs in some browsers */ }
  }

  function go(n) {
    var max = st.pos.length - 1;
    st.n = Math.max(0, Math.min(max, isNaN(n) ? 0 : n));
    draw();
  }

  function pick(i, n) {
    st.g = Math.max(0, Math.min(D.games.length - 1, i));
    var g = game();
    st.pos = positions(g);
    $('kg').value = st.g;
    $('kgame').textContent = g.title;
    var who = (g.b ? '☗ ' + g.b : '') + (g.b && g.w ? '  ' : '') + (g.w ? '☖ ' + g.w : '');
    $('knote').textContent = who + (who && g.note ? ' · ' : '') + (g.note || '');
    drawValue(g);
    moveList(g);
    st.n = 0;
    go(n === undefined ? 0 : n);
  }

  function key(k) {
    var n = st.n;
    if (k === 'ArrowRight') go(n + 1);
    else if (k === 'ArrowLeft') go(n - 1);
    else if (k === 'Home') go(0);
    else if (k === 'End') go(st.pos.length - 1);
    else if (k === 'PageDown') go(n + 10);
    else if (k === 'PageUp') go(n - 10);
    else if (k === 'ArrowDown') pick(st.g + 1);
    else if (k === 'ArrowUp') pick(st.g - 1);
    else if (k === 'l' || k === 'L') { $('klet').checked = !st.letters; letters(); }
    else return false;
    return true;
  }

  function letters() {
    st.letters = $('klet').checked;
    moveList(game());
    draw();
  }

  /* ---- start ---------------------------------------------------------------------------- */
  var sel = $('kg');
  D.games.forEach(function (g, i) {
    var o = document.createElement('option');
    o.value = i;
    o.textContent = g.title;
    sel.appendChild(o);
  });
  sel.onchange = function () { pick(+sel.value); };
  $('klet').onchange = letters;
  $('kfirst').onclick = function () { go(0); };
  $('kprev').onclick = function () { go(st.n - 1); };
  $('knext').onclick = function () { go(st.n + 1); };
  $('klast').onclick = function () { go(st.pos.length - 1); };
  document.addEventListener('keydown', function (ev) {
    if (ev.target && (ev.target.tagName === 'SELECT' || ev.target.tagName === 'INPUT') &&
        (ev.key === 'ArrowUp' || ev.key === 'ArrowDown')) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (key(ev.key)) ev.preventDefault();
  });

  var q = {}, src = (location.search.substr(1) + '&' + location.hash.substr(1)).split('&');
  src.forEach(function (kv) {
    var i = kv.indexOf('=');
    if (i > 0) q[kv.substr(0, i)] = decodeURIComponent(kv.substr(i + 1));
  });
  var gi = D.first;
  if (q.game !== undefined)
    for (var i = 0; i < D.games.length; i++) if ('' + D.games[i].id === q.game) gi = i;
  if (q.letters === '1') { $('klet').checked = true; st.letters = true; }
  pick(gi, q.move !== undefined ? parseInt(q.move, 10) : 0);
  root.setAttribute('data-ready', '1');
})();
