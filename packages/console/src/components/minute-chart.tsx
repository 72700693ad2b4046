import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { formatAxisCount } from '../format';

/** One line of a chart. */
export interface ChartSeries {
  label: string;
  /** CSS colour of the line. */
  stroke: string;
  values: number[];
}

/**
 * A per-minute line chart (uPlot, drawn on a canvas). Screen readers get `summary` instead: the
 * canvas is hidden from them and the figure is labelled with the totals.
 */
export function MinuteChart(props: { title: string; summary: string; minutes: number[]; series: ChartSeries[] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const data: uPlot.AlignedData = [props.minutes, ...props.series.map((s) => s.values)];

  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const chart = new uPlot(
      {
        width: Math.max(element.clientWidth, 240),
        height: 200,
        series: [
          {},
          ...props.series.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, points: { show: false } })),
        ],
        axes: [{}, { size: 60, values: (_u, splits) => splits.map(formatAxisCount) }],
        scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      element,
    );
    plot.current = chart;
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(element.clientWidth, 240), height: 200 }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
    };
    // The chart is built once; new data goes through setData below.
  }, []);

  useEffect(() => plot.current?.setData(data), [props.minutes, props.series]);

  return (
    <figure class="chart" aria-label={`${props.title}: ${props.summary}`}>
      <figcaption>
        <span class="chart-title">{props.title}</span> <span class="chart-summary">{props.summary}</span>
      </figcaption>
      <div ref={box} aria-hidden="true" />
      <ul class="legend" aria-hidden="true">
        {props.series.map((s) => (
          <li key={s.label}>
            <span class="swatch" style={{ backgroundColor: s.stroke }} />
            {s.label}
          </li>
        ))}
      </ul>
    </figure>
  );
}
