// The minidet backward explorer: plays one recorded backward pass, node by node.
//
// The page holds three things (autograd/backward_html.cpp puts them there):
//   - the graph, laid out by Graphviz as SVG: <g class="node" id="n<ID>"> per node, <g class="edge"
//     id="e<FROM>_<INPUT>"> per gradient edge, <g class="cluster" id="c:<module>"> per module scope;
//   - the record (#record, autograd/backward_record.h): nodes in the engine's execution order, each with its
//     shapes, its edges and summaries of the gradients that arrived (grads_in, one per forward output) and
//     that it sent (grads_out, one per forward input);
//   - the op docs (#docs): the comment block that opens each op's header, i.e. its backward math.
//
// "Step S" means the engine has run nodes 1..S: node S is the one running now, its out-edges carry the
// gradients it just produced. Step 0 is before backward starts. Plain ES2017, no libraries.
(function () {
  'use strict';

  // ---- the data --------------------------------------------------------------------------------------

  const record = JSON.parse(document.getElementById('record').textContent);
  const docs = JSON.parse(document.getElementById('docs').textContent);
  const nodes = record.nodes;  // nodes[i].step === i + 1
  const byId = new Map(nodes.map(node => [node.id, node]));
  const leaves = nodes.filter(isLeaf).sort((a, b) => leafName(a).localeCompare(leafName(b)));

  // Who sends gradients to each node: id -> [{from, index, slot}] (the reverse of the edges lists).
  const incoming = new Map(nodes.map(node => [node.id, []]));
  for (const node of nodes) {
    node.edges.forEach((edge, index) => {
      if (edge.to >= 0 && incoming.has(edge.to)) incoming.get(edge.to).push({from: node.id, index, slot: edge.slot});
    });
  }

  function isLeaf(node) { return node.op === 'AccumulateGrad'; }
  function leafName(node) { return node.leaf || 'leaf ' + node.id; }
  function nodeName(node) { return isLeaf(node) ? leafName(node) : node.op; }

  // The module a node is drawn in; mirrors cluster_scope() in backward_html.cpp. A leaf sits with its
  // parameter's module: "backbone.stem.conv.weight" -> "backbone.stem.conv".
  function clusterScopeOf(node) {
    if (isLeaf(node) && node.leaf) {
      const dot = node.leaf.lastIndexOf('.');
      return dot < 0 ? '' : node.leaf.slice(0, dot);
    }
    return node.scope;
  }
  // "a.b.c" -> ["a", "a.b", "a.b.c"]: the clusters that contain a node of this scope, outermost first.
  function scopeChain(scope) {
    if (!scope) return [];
    const parts = scope.split('.');
    return parts.map((_, i) => parts.slice(0, i + 1).join('.'));
  }

  // ---- small helpers, and the views of one gradient (explorer_views.js) -----------------------------------
  const $ = id => document.getElementById(id);
  const {el, fmt, tensorText, gradSummary} = explorerViews;

  // ---- the graph: elements, pan and zoom ---------------------------------------------------------------

  const svg = document.querySelector('#graph svg');
  const graphRoot = svg.querySelector('g.graph');
  const nodeEl = new Map();   // id -> <g class="node">
  const edgeEls = new Map();  // id -> [{element, to}] for its out-edges
  for (const node of nodes) {
    const g = document.getElementById('n' + node.id);
    if (g) {
      nodeEl.set(node.id, g);
      const title = g.querySelector('title');  // Graphviz's tooltip is the DOT name: say something useful
      if (title) title.textContent = nodeName(node) + (node.scope ? ' in ' + node.scope : '') + ', step ' + node.step;
    }
    edgeEls.set(node.id, node.edges.map((edge, index) => ({
      element: document.getElementById('e' + node.id + '_' + index), to: edge.to,
    })).filter(entry => entry.element));
  }

  // The view is the SVG viewBox: zooming scales it, panning moves it, "fit" restores Graphviz's own.
  const fullView = svg.viewBox.baseVal ? {
    x: svg.viewBox.baseVal.x, y: svg.viewBox.baseVal.y,
    w: svg.viewBox.baseVal.width, h: svg.viewBox.baseVal.height,
  } : {x: 0, y: 0, w: 1000, h: 1000};
  let view = Object.assign({}, fullView);
  svg.removeAttribute('width');  // Graphviz sizes the SVG in points; the page sizes it to the pane instead
  svg.removeAttribute('height');
  function setView(next) {
    view = next;
    svg.setAttribute('viewBox', [view.x, view.y, view.w, view.h].join(' '));
  }
  // A point on the screen in viewBox units.
  function toSvgPoint(clientX, clientY) {
    const point = svg.createSVGPoint();
    point.x = clientX;
    point.y = clientY;
    return point.matrixTransform(svg.getScreenCTM().inverse());
  }
  function zoom(factor, center) {
    // From about one node across the pane (Graphviz draws in points; a node is 50-100 wide) to five times
    // the whole graph.
    const width = Math.min(Math.max(view.w * factor, 100), 5 * Math.max(fullView.w, 100));
    factor = width / view.w;
    const c = center || {x: view.x + view.w / 2, y: view.y + view.h / 2};
    setView({x: c.x + (view.x - c.x) * factor, y: c.y + (view.y - c.y) * factor,
             w: view.w * factor, h: view.h * factor});
  }
  // A node's box in viewBox units: its box inside the graph group, through that group's transform
  // (Graphviz translates the whole drawing so y grows downwards from the top).
  function nodeBox(g) {
    const box = g.getBBox();
    const m = graphRoot.transform.baseVal.consolidate();
    const matrix = m ? m.matrix : svg.createSVGMatrix();
    const p = svg.createSVGPoint();
    p.x = box.x;
    p.y = box.y;
    const topLeft = p.matrixTransform(matrix);
    return {x: topLeft.x, y: topLeft.y, w: box.width * matrix.a, h: box.height * matrix.d};
  }
  // Centres the node when it is not wholly on screen, or `always`. With `readable`, zooms in first when
  // the node is drawn too small to read (the whole detector fits the pane only at a tiny scale).
  function reveal(id, always, readable) {
    const g = nodeEl.get(Number(id));
    if (!g || g.style.display === 'none') return;
    const box = nodeBox(g);
    const inside = box.x >= view.x && box.x + box.w <= view.x + view.w &&
                   box.y >= view.y && box.y + box.h <= view.y + view.h;
    const pixelsPerUnit = svg.getScreenCTM().a;
    const factor = readable && box.h * pixelsPerUnit < 14 ? box.h * pixelsPerUnit / 28 : 1;
    if (inside && !always && factor === 1) return;
    const w = view.w * factor, h = view.h * factor;
    setView({x: box.x + box.w / 2 - w / 2, y: box.y + box.h / 2 - h / 2, w, h});
  }

  svg.addEventListener('wheel', event => {
    event.preventDefault();
    zoom(Math.exp(event.deltaY * 0.0015), toSvgPoint(event.clientX, event.clientY));
  }, {passive: false});

  // Drag to pan. A press that moves less than a few pixels is a click (on a node or a cluster label).
  let drag = null;
  let dragged = false;
  svg.addEventListener('pointerdown', event => {
    drag = {x: event.clientX, y: event.clientY, view: Object.assign({}, view), scale: svg.getScreenCTM().a};
    dragged = false;
  });
  window.addEventListener('pointermove', event => {
    if (!drag) return;
    const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!dragged && Math.abs(dx) + Math.abs(dy) < 4) return;
    dragged = true;
    $('graph').classList.add('dragging');
    setView({x: drag.view.x - dx / drag.scale, y: drag.view.y - dy / drag.scale, w: view.w, h: view.h});
  });
  window.addEventListener('pointerup', () => {
    drag = null;
    $('graph').classList.remove('dragging');
  });
  svg.addEventListener('click', event => {
    if (dragged) return;
    const node = event.target.closest('g.node');
    if (node) return select(Number(node.id.slice(1)));
    // A cluster toggles from its label, or from anywhere once collapsed (its box is then one block).
    const cluster = event.target.closest('g.cluster');
    if (cluster && (event.target.tagName === 'text' || cluster.classList.contains('collapsed'))) {
      toggleCluster(cluster.id.slice(2));  // "c:<scope>"
    }
  });
  $('btn-zoom-in').addEventListener('click', () => zoom(1 / 1.4));
  $('btn-zoom-out').addEventListener('click', () => zoom(1.4));
  $('btn-fit').addEventListener('click', () => setView(Object.assign({}, fullView)));

  // ---- module clusters: collapse and expand --------------------------------------------------------------

  const clusterEl = new Map();  // scope -> <g class="cluster">
  for (const g of svg.querySelectorAll('g.cluster')) {
    if (!g.id.startsWith('c:')) continue;
    clusterEl.set(g.id.slice(2), g);
    // Graphviz centres the label on its x; anchor it at its left end instead, so that the longer label of
    // a collapsed cluster grows to the right, into the box.
    const label = g.querySelector('text');
    if (label && label.getAttribute('text-anchor') === 'middle') {
      label.setAttribute('x', Number(label.getAttribute('x')) - label.getComputedTextLength() / 2);
      label.setAttribute('text-anchor', 'start');
    }
  }
  // How many nodes each cluster holds, nested ones included.
  const clusterSize = new Map();
  for (const node of nodes) {
    for (const scope of scopeChain(clusterScopeOf(node))) clusterSize.set(scope, (clusterSize.get(scope) || 0) + 1);
  }
  const collapsed = new Set();

  // The outermost collapsed cluster that hides this node, or null when it is visible.
  function hiddenBy(node) {
    for (const scope of scopeChain(clusterScopeOf(node))) if (collapsed.has(scope)) return scope;
    return null;
  }

  function applyCollapsed() {
    const hider = new Map(nodes.map(node => [node.id, hiddenBy(node)]));
    for (const node of nodes) {
      const g = nodeEl.get(node.id);
      if (g) g.style.display = hider.get(node.id) ? 'none' : '';
      // An edge inside one collapsed cluster is hidden; one that enters or leaves it still shows where
      // gradients cross the module's boundary.
      for (const edge of edgeEls.get(node.id)) {
        const inside = hider.get(node.id) && hider.get(node.id) === hider.get(edge.to);
        edge.element.style.display = inside ? 'none' : '';
      }
    }
    for (const [scope, g] of clusterEl) {
      const parents = scopeChain(scope).slice(0, -1);
      g.style.display = parents.some(p => collapsed.has(p)) ? 'none' : '';
      g.classList.toggle('collapsed', collapsed.has(scope));
      const label = g.querySelector('text');
      if (label) {
        const short = scope.slice(scope.lastIndexOf('.') + 1);
        label.textContent = collapsed.has(scope) ? scope + ' (' + clusterSize.get(scope) + ' nodes)' : short;
      }
    }
    for (const li of $('module-tree').querySelectorAll('li')) {
      li.classList.toggle('collapsed', collapsed.has(li.dataset.scope));
    }
    markRunningCluster();
  }
  function toggleCluster(scope) {
    if (collapsed.has(scope)) collapsed.delete(scope);
    else collapsed.add(scope);
    applyCollapsed();
  }
  // A node chosen by the reader (search, lists) must be visible: open the clusters around it.
  function expandAround(node) {
    let changed = false;
    for (const scope of scopeChain(clusterScopeOf(node))) changed = collapsed.delete(scope) || changed;
    if (changed) applyCollapsed();
  }

  // The side panel's tree of module scopes: nested lists, each item toggles its cluster.
  function buildModuleTree() {
    const children = new Map([['', []]]);
    for (const scope of Array.from(clusterSize.keys()).sort()) {
      const parent = scope.includes('.') ? scope.slice(0, scope.lastIndexOf('.')) : '';
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(scope);
      if (!children.has(scope)) children.set(scope, []);
    }
    function list(parent) {
      const ul = el('ul');
      for (const scope of children.get(parent) || []) {
        const li = el('li', {'data-scope': scope},
          el('span', {text: scope.slice(scope.lastIndexOf('.') + 1), title: scope, onclick: () => toggleCluster(scope)}),
          el('span', {class: 'muted', text: ' ' + clusterSize.get(scope)}));
        if ((children.get(scope) || []).length) li.append(list(scope));
        ul.append(li);
      }
      return ul;
    }
    $('module-tree').replaceChildren(...list('').childNodes);
  }
  $('btn-collapse-all').addEventListener('click', () => {
    // Collapsing the top-level modules is enough: the nested ones are inside them.
    for (const scope of clusterSize.keys()) if (!scope.includes('.')) collapsed.add(scope);
    applyCollapsed();
  });
  $('btn-expand-all').addEventListener('click', () => {
    collapsed.clear();
    applyCollapsed();
  });

  // ---- stepping through the execution order -------------------------------------------------------------

  let step = 0;
  const orderItems = [];  // orderItems[s - 1] is the <li> of step s
  const paramItems = new Map();  // leaf id -> <li>

  function buildLists() {
    $('node-count').textContent = String(nodes.length);
    $('step-input').max = String(nodes.length);
    const order = $('order-list');
    for (const node of nodes) {
      const li = el('li', {'data-node-id': node.id, 'data-step': node.step,
                           title: nodeName(node) + (node.scope ? ' in ' + node.scope : '')},
        el('span', {class: 'step', text: String(node.step)}), nodeName(node),
        el('span', {class: 'muted', text: node.scope ? ' ' + node.scope : ''}));
      li.addEventListener('click', () => goToStep(node.step));
      orderItems.push(li);
      order.append(li);
    }
    const params = $('param-list');
    for (const leaf of leaves) {
      const li = el('li', {'data-node-id': leaf.id, title: leafName(leaf)},
        el('span', {class: 'grad', text: 'no .grad'}), leafName(leaf));
      li.addEventListener('click', () => choose(leaf.id));
      paramItems.set(leaf.id, li);
      params.append(li);
    }
  }

  // Sets the classes that depend on the step for the nodes whose status changed between two steps.
  function paintSteps(from, to) {
    const lo = Math.max(1, Math.min(from, to) - 1), hi = Math.min(nodes.length, Math.max(from, to) + 1);
    for (let s = lo; s <= hi; ++s) {
      const node = nodes[s - 1];
      const done = s < step, running = s === step;
      const g = nodeEl.get(node.id);
      if (g) {
        g.classList.toggle('done', done);
        g.classList.toggle('running', running);
      }
      for (const edge of edgeEls.get(node.id)) {
        edge.element.classList.toggle('flowing', running);
        edge.element.classList.toggle('flowed', done);
      }
      orderItems[s - 1].classList.toggle('done', done);
      orderItems[s - 1].classList.toggle('current', running);
      if (isLeaf(node)) paintParameter(node, s <= step, running);
    }
  }

  // A parameter shows its .grad norm once its AccumulateGrad has run.
  function paintParameter(leaf, has, justNow) {
    const li = paramItems.get(leaf.id);
    li.classList.toggle('has-grad', has);
    li.classList.toggle('just-now', justNow);
    const norm = leaf.leaf_grad ? leaf.leaf_grad.norm : null;
    li.querySelector('.grad').textContent = has ? '|grad| ' + fmt(norm) : 'no .grad';
  }

  function markRunningCluster() {
    for (const g of clusterEl.values()) g.classList.remove('running');
    const node = nodes[step - 1];
    const scope = node && hiddenBy(node);
    if (scope && clusterEl.has(scope)) clusterEl.get(scope).classList.add('running');
  }

  function goToStep(target) {
    const s = Math.max(0, Math.min(nodes.length, Math.round(Number(target)) || 0));
    const previous = step;
    step = s;
    paintSteps(previous, s);
    const node = nodes[s - 1];
    document.body.dataset.currentStep = String(s);
    document.body.dataset.currentNode = node ? String(node.id) : '';
    $('step-label').textContent = 'step ' + s + ' / ' + nodes.length;
    $('step-input').value = String(s);
    const have = leaves.filter(leaf => leaf.step <= s).length;
    $('param-count').textContent = have + ' / ' + leaves.length;
    markRunningCluster();
    if (node) {
      select(node.id);
      if ($('follow').checked) reveal(node.id, false, true);
      orderItems[s - 1].scrollIntoView({block: 'nearest'});
      if (isLeaf(node)) paramItems.get(node.id).scrollIntoView({block: 'nearest'});
    }
    if (s >= nodes.length) pause();
  }

  let timer = null;
  function play() {
    if (step >= nodes.length) goToStep(0);
    $('btn-play').textContent = 'pause';
    timer = setInterval(() => goToStep(step + 1), Number($('speed').value));
  }
  function pause() {
    if (timer) clearInterval(timer);
    timer = null;
    $('btn-play').textContent = 'play';
  }
  $('btn-first').addEventListener('click', () => { pause(); goToStep(0); });
  $('btn-prev').addEventListener('click', () => { pause(); goToStep(step - 1); });
  $('btn-next').addEventListener('click', () => { pause(); goToStep(step + 1); });
  $('btn-last').addEventListener('click', () => { pause(); goToStep(nodes.length); });
  $('btn-play').addEventListener('click', () => (timer ? pause() : play()));
  $('speed').addEventListener('change', () => { if (timer) { pause(); play(); } });
  $('btn-jump').addEventListener('click', () => { pause(); goToStep($('step-input').value); });
  $('step-input').addEventListener('keydown', event => {
    if (event.key === 'Enter') { pause(); goToStep($('step-input').value); }
  });
  document.addEventListener('keydown', event => {
    if (event.target.closest('input, select, textarea, button')) return;
    const keys = {ArrowRight: () => goToStep(step + 1), ArrowLeft: () => goToStep(step - 1),
                  Home: () => goToStep(0), End: () => goToStep(nodes.length), ' ': () => (timer ? pause() : play())};
    if (keys[event.key]) {
      event.preventDefault();
      if (event.key !== ' ') pause();
      keys[event.key]();
    }
  });

  // ---- the node panel ----------------------------------------------------------------------------------

  let selected = null;

  function select(id) {
    const node = byId.get(Number(id));
    if (!node) return;
    if (selected !== null) {
      const old = nodeEl.get(selected);
      if (old) old.classList.remove('selected');
      for (const li of document.querySelectorAll('.list li.selected')) li.classList.remove('selected');
    }
    selected = node.id;
    const g = nodeEl.get(node.id);
    if (g) g.classList.add('selected');
    for (const li of document.querySelectorAll('.list li[data-node-id="' + node.id + '"]')) li.classList.add('selected');
    document.body.dataset.selectedNode = String(node.id);
    renderPanel(node);
  }
  // The reader picked a node from a list: show it in the graph too.
  function choose(id) {
    const node = byId.get(Number(id));
    if (!node) return;
    expandAround(node);
    select(node.id);
    reveal(node.id, true, true);
  }

  function renderPanel(node) {
    $('panel-empty').hidden = true;
    $('panel-body').hidden = false;
    $('panel-op').textContent = node.op;
    const names = isLeaf(node) ? [leafName(node)] : (node.output_names || []).filter(Boolean);
    $('panel-names').textContent = names.join(', ');
    $('panel-scope').textContent = node.scope || '(top level)';
    $('panel-source').textContent = node.source || '(unknown)';
    $('panel-step').textContent = node.step + ' of ' + nodes.length;
    $('panel-id').textContent = String(node.id);
    $('panel-tensors').replaceChildren(tensorTable(node));

    const grads = [];
    if (isLeaf(node)) {
      grads.push(node.leaf_grad ? gradSummary(node.leaf_grad, 'leaf', 0, leafName(node) + '.grad after this step')
                                : el('div', {class: 'grad-none', text: 'no .grad recorded'}));
    }
    (node.grads_in || []).forEach((summary, i) => {
      const senders = incoming.get(node.id).filter(edge => edge.slot === i);
      const what = 'gradient in, of output ' + i + (senders.length > 1 ? ' (the sum of ' + senders.length + ' edges)' : '');
      grads.push(summary ? gradSummary(summary, 'in', i, what)
                         : el('div', {class: 'grad-none', text: 'output ' + i + ': no gradient arrived'}));
    });
    (node.grads_out || []).forEach((summary, i) => {
      const edge = node.edges[i];
      const target = edge && byId.get(edge.to);
      const what = 'gradient out, of input ' + i + (target ? ', to ' + nodeName(target) + ' (step ' + target.step + ')' : '');
      grads.push(summary ? gradSummary(summary, 'out', i, what)
                         : el('div', {class: 'grad-none', text: 'input ' + i + ': needs no gradient'}));
    });
    $('panel-grads').replaceChildren(...grads);

    const header = docs.by_source[node.source];
    if (header && docs.headers[header]) {
      $('panel-header').textContent = header;
      $('panel-doc').textContent = docs.headers[header];
    } else if (isLeaf(node)) {
      $('panel-header').textContent = 'autograd/node.h';
      $('panel-doc').textContent =
        'AccumulateGrad is the sink of a leaf (a parameter, or an input that requires grad).\n' +
        'backward: leaf.grad += incoming gradient   (parameters accumulate; activations are written once)\n' +
        'It returns nothing: the gradient stops here, and the optimizer reads leaf.grad.';
    } else {
      $('panel-header').textContent = node.source ? 'no op header documents ' + node.source : '';
      $('panel-doc').textContent = '';
    }
  }

  // Forward inputs and outputs; each input says where its gradient went, each output where its came from.
  function tensorTable(node) {
    const table = el('table', {class: 'tensor-table'}, el('tr', {}, el('th', {text: ''}), el('th', {text: 'shape, dtype'}),
                                                        el('th', {text: 'gradient'})));
    node.inputs.forEach((meta, i) => {
      const edge = node.edges[i];
      const target = edge && byId.get(edge.to);
      table.append(el('tr', {}, el('td', {text: 'input ' + i}), el('td', {text: tensorText(meta)}),
        el('td', {}, target ? nodeLink(target, 'to ') : el('span', {class: 'muted', text: 'none'}))));
    });
    node.outputs.forEach((meta, i) => {
      const name = (node.output_names || [])[i];
      const senders = incoming.get(node.id).filter(edge => edge.slot === i).map(edge => byId.get(edge.from));
      const cell = el('td', {});
      if (!senders.length) cell.append(el('span', {class: 'muted', text: node.step === 1 ? 'the root' : 'none'}));
      senders.forEach((sender, k) => cell.append(k ? ', ' : '', nodeLink(sender, 'from ')));
      table.append(el('tr', {}, el('td', {text: 'output ' + i + (name ? ' ' + name : '')}),
                   el('td', {text: tensorText(meta)}), cell));
    });
    return table;
  }
  function nodeLink(node, prefix) {
    return el('span', {class: 'link', text: prefix + nodeName(node) + ' #' + node.step, onclick: () => choose(node.id)});
  }

  // One gradient: statistics (data-value keeps the exact JSON number), histogram, heat map, small values.
  // ---- search, filter and the path to the parameters ------------------------------------------------------

  const MAX_RESULTS = 300;
  function matches(node, query) {
    const fields = [node.op, node.scope, node.leaf].concat(node.output_names || []);
    return fields.some(field => field && field.toLowerCase().includes(query));
  }
  function search(text) {
    const query = text.trim().toLowerCase();
    const found = query ? nodes.filter(node => matches(node, query)) : [];
    const hits = new Set(found.map(node => node.id));
    svg.classList.toggle('filtering', query !== '');
    for (const [id, g] of nodeEl) g.classList.toggle('match', hits.has(id));
    $('search-section').hidden = query === '';
    $('search-count').textContent = String(found.length);
    $('search-results').replaceChildren(...found.slice(0, MAX_RESULTS).map(node => {
      const names = [node.leaf].concat(node.output_names || []).filter(Boolean).join(', ');
      const li = el('li', {'data-node-id': node.id, title: node.scope},
        el('span', {class: 'step', text: String(node.step)}), node.op + (names ? ' ' + names : ''),
        el('span', {class: 'muted', text: node.scope ? ' ' + node.scope : ''}));
      li.addEventListener('click', () => choose(node.id));
      return li;
    }));
  }
  $('search').addEventListener('input', event => search(event.target.value));

  // Every node the selected node's gradient reaches along the edges, down to the leaves it updates.
  function highlightPath() {
    clearPath();
    if (selected === null) return;
    const reached = new Set([selected]);
    const stack = [selected];
    while (stack.length) {
      const id = stack.pop();
      for (const edge of byId.get(id).edges) {
        if (edge.to >= 0 && byId.has(edge.to) && !reached.has(edge.to)) {
          reached.add(edge.to);
          stack.push(edge.to);
        }
      }
    }
    for (const id of reached) {
      const g = nodeEl.get(id);
      if (g) g.classList.add('on-path');
      for (const edge of edgeEls.get(id)) edge.element.classList.add('on-path');
    }
    $('path-count').textContent = String(reached.size);
  }
  function clearPath() {
    for (const element of svg.querySelectorAll('.on-path')) element.classList.remove('on-path');
    $('path-count').textContent = '0';
  }
  $('btn-path').addEventListener('click', highlightPath);
  $('btn-clear-path').addEventListener('click', clearPath);

  // ---- start -------------------------------------------------------------------------------------------

  buildLists();
  buildModuleTree();
  applyCollapsed();
  goToStep(0);
  window.explorer = {record, docs, select, goToStep, search, toggleCluster, highlightPath,
                     reveal: id => reveal(id, true), fit: () => setView(Object.assign({}, fullView)),
                     get step() { return step; }, get selected() { return selected; }};
})();
