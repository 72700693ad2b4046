import { issuePaths, withFields } from '../__fixtures__/issues';
import { Model, ModelList } from './model.schema';

const model = { id: 'tollway/sim-chat', object: 'model', created: 1789000000, owned_by: 'tollway' };

describe('Model', () => {
  it.each([
    ['a catalog model', model],
    ['an id with dots and dashes', withFields(model, { id: 'meta-llama/Llama-3.1-8B-Instruct' })],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(Model, body)).toEqual([]);
  });

  it.each([
    ['an id without an author', { id: 'sim-chat' }, 'id'],
    ['an id with three parts', { id: 'a/b/c' }, 'id'],
    ['an id with an empty slug', { id: 'tollway/' }, 'id'],
    ['an id with a blank', { id: 'tollway/sim chat' }, 'id'],
    ['a wrong object', { object: 'models' }, 'object'],
    ['created as a string', { created: '1789000000' }, 'created'],
    ['created fractional', { created: 1.5 }, 'created'],
    ['owned_by missing', { owned_by: undefined }, 'owned_by'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(Model, withFields(model, patch))).toEqual([path]);
  });
});

describe('ModelList', () => {
  it('accepts a list, empty or not', () => {
    expect(issuePaths(ModelList, { object: 'list', data: [model] })).toEqual([]);
    expect(issuePaths(ModelList, { object: 'list', data: [] })).toEqual([]);
  });

  it.each([
    ['a wrong object', { object: 'lists', data: [] }, 'object'],
    ['data missing', { object: 'list' }, 'data'],
    ['a bad item', { object: 'list', data: [model, { ...model, object: 'x' }] }, 'data.1.object'],
  ])('refuses %s at its path', (_name, body, path) => {
    expect(issuePaths(ModelList, body)).toEqual([path]);
  });
});
