// The backward explorer's views of one gradient, as plain functions of the record's data: its statistics,
// its histogram and its heat map (autograd/backward_record.h's TensorSummary), and the small DOM helpers they
// share. explorer.js, the page's script, uses them through `explorerViews`; the two are embedded in this
// order (autograd/explorer/embed.cmake). Plain ES2017, no libraries.
const explorerViews = (function () {
  'use strict';


  function el(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === 'class') element.className = value;
      else if (key === 'text') element.textContent = value;
      else if (key.startsWith('on')) element.addEventListener(key.slice(2), value);
      else element.setAttribute(key, value);
    }
    for (const child of children) if (child != null) element.append(child);
    return element;
  }
  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svgEl(tag, attributes) {
    const element = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attributes || {})) element.setAttribute(key, value);
    return element;
  }
  // Readable numbers for the eye; data-value attributes keep the exact ones.
  function fmt(x) {
    if (x === null || x === undefined) return 'n/a';
    if (Number.isInteger(x) && Math.abs(x) < 1e6) return String(x);
    const a = Math.abs(x);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(3) : String(+x.toPrecision(4));
  }
  function shapeText(shape) {
    return '(' + shape.join(', ') + (shape.length === 1 ? ',)' : ')');
  }
  function tensorText(meta) { return shapeText(meta.shape) + ' ' + meta.dtype; }


  function gradSummary(summary, kind, index, what) {
    const box = el('div', {class: 'grad-summary', 'data-kind': kind, 'data-index': String(index)},
      el('h4', {text: what}),
      el('div', {class: 'muted', text: shapeText(summary.shape) + ' ' + summary.dtype + ', ' + summary.numel + ' values'}));
    const stats = el('div', {class: 'stats'});
    const names = [['norm', 'norm'], ['mean', 'mean'], ['min', 'min'], ['max', 'max'], ['max_abs', 'max |x|'],
                   ['nan', 'NaN'], ['inf', 'Inf']];
    for (const [key, label] of names) {
      const value = summary[key];
      const cell = el('div', {'data-stat': key, 'data-value': String(value)}, el('span', {text: label}), fmt(value));
      if ((key === 'nan' || key === 'inf') && value > 0) cell.classList.add('bad');
      stats.append(cell);
    }
    box.append(stats);
    if (summary.hist && summary.hist.length) box.append(histogram(summary));
    const map = summary.heat_map || (summary.values && summary.shape.length === 1 && summary.numel > 1 ?
      {rows: 1, cols: summary.numel, values: summary.values, what: 'the values, left to right'} : null);
    if (map && map.rows > 0 && map.cols > 0) box.append(heatMap(map));
    if (summary.values && summary.numel <= 32) {
      box.append(el('div', {class: 'values', text: '[' + summary.values.map(v => (v === null ? 'NaN/Inf' : fmt(v))).join(', ') + ']'}));
    }
    return box;
  }

  // Counts per bin as bars between hist_low and hist_high; a line marks 0 when it is in range.
  function histogram(summary) {
    const width = 330, height = 70, axis = 12;
    const counts = summary.hist;
    const most = Math.max(1, ...counts);
    const chart = svgEl('svg', {class: 'hist', width, height, viewBox: '0 0 ' + width + ' ' + height});
    const barWidth = width / counts.length;
    const binWidth = (summary.hist_high - summary.hist_low) / counts.length;
    counts.forEach((count, i) => {
      const h = count ? Math.max(1, (height - axis) * count / most) : 0;
      const bar = svgEl('rect', {x: i * barWidth + 0.5, y: height - axis - h, width: Math.max(1, barWidth - 1), height: h});
      const title = svgEl('title');
      title.textContent = '[' + fmt(summary.hist_low + i * binWidth) + ', ' + fmt(summary.hist_low + (i + 1) * binWidth) +
                          '): ' + count;
      bar.append(title);
      chart.append(bar);
    });
    if (summary.hist_low < 0 && summary.hist_high > 0) {
      const x = width * (0 - summary.hist_low) / (summary.hist_high - summary.hist_low);
      chart.append(svgEl('line', {x1: x, x2: x, y1: 0, y2: height - axis, stroke: '#d33', 'stroke-dasharray': '2 2'}));
    }
    const low = svgEl('text', {x: 0, y: height - 2});
    low.textContent = fmt(summary.hist_low);
    const high = svgEl('text', {x: width, y: height - 2, 'text-anchor': 'end'});
    high.textContent = fmt(summary.hist_high);
    chart.append(low, high);
    return chart;
  }

  // A diverging colour map centred on 0: blue below, white at 0, red above, scaled by the map's max |v|.
  function heatMap(map) {
    const canvas = el('canvas', {class: 'heat', width: map.cols, height: map.rows});
    const context = canvas.getContext('2d');
    const image = context.createImageData(map.cols, map.rows);
    const extent = Math.max(1e-30, ...map.values.map(v => (v === null ? 0 : Math.abs(v))));
    map.values.forEach((v, i) => {
      let r = 0, g = 0, b = 0;
      if (v === null) { r = 60; g = 60; b = 60; }  // a non-finite value
      else {
        const t = Math.min(1, Math.abs(v) / extent);
        const fade = Math.round(255 * (1 - t));
        if (v >= 0) { r = 255; g = fade; b = fade; } else { r = fade; g = fade; b = 255; }
      }
      image.data.set([r, g, b, 255], 4 * i);
    });
    context.putImageData(image, 0, 0);
    // Big enough to see each cell, small enough for the panel; pixelated scaling keeps cells sharp.
    // A single row (a 1-D tensor) is drawn as a strip at least 12 px tall.
    const scale = Math.min(330 / map.cols, 200 / map.rows, 24);
    canvas.style.width = Math.round(map.cols * scale) + 'px';
    canvas.style.height = Math.max(map.rows === 1 ? 12 : 0, Math.round(map.rows * scale)) + 'px';
    return el('div', {}, canvas,
      el('div', {class: 'heat-legend', text: (map.values.some(v => v !== null && v < 0) ? 'blue -' + fmt(extent) + ' \u00b7 ' : '') +
                                             'white 0 \u00b7 red +' + fmt(extent) +
                                             ' \u00b7 ' + map.rows + 'x' + map.cols + (map.what ? ', ' + map.what : '')}));
  }

  return {el, fmt, tensorText, gradSummary};
})();
