// First: configures Zod before @tollway/contracts defines its schemas.
import './zod-setup';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { App } from './app';

render(<App />, document.getElementById('app') as HTMLElement);
