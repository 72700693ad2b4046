import { formatAxisCount } from './format';

// Axis labels of the usage charts.
describe('formatAxisCount', () => {
  it('writes counts compactly past a thousand', () => {
    expect([0, 0.25, 950, 1500, 12_500, 100_000, 1_250_000, 2e9].map(formatAxisCount)).toEqual([
      '0',
      '0.25',
      '950',
      '1.5K',
      '12.5K',
      '100K',
      '1.25M',
      '2B',
    ]);
  });

  it('keeps every label of the charts within five characters, the width their axis has room for', () => {
    // Tick values uPlot picks (multiples of 1, 2, 2.5 and 5 times a power of ten), from a quarter
    // of a request to a trillion tokens a minute.
    for (let power = -1; power <= 12; power++) {
      for (const step of [1, 1.25, 2, 2.5, 3.75, 5, 7.5]) {
        const label = formatAxisCount(step * 10 ** power);
        expect([label, label.length <= 5]).toEqual([label, true]);
      }
    }
  });
});
