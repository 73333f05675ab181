// The served OpenAPI document against the official OpenAPI 3.1 JSON Schema
// (@seriousme/openapi-schema-validator, which carries the schemas: nothing
// is fetched), and the browsable page that renders it from the binary.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startStack, newPage, screenshot } from './harness.mjs';

describe('the API documentation', () => {
  let stack;
  before(async () => {
    stack = await startStack({ hosts: [] });
  });
  after(async () => {
    await stack?.stop();
  });

  it('the served document is valid OpenAPI 3.1', async () => {
    const res = await fetch(`${stack.appUrl}/api/v1/openapi.json`);
    assert.equal(res.status, 200);
    const doc = await res.json();
    const validator = new Validator();
    const result = await validator.validate(doc);
    assert.equal(validator.version, '3.1');
    assert.deepEqual(result.errors ?? [], [], 'no schema violation');
    assert.equal(result.valid, true);
    // The validator can fail: the same document without its info does not pass.
    const broken = structuredClone(doc);
    delete broken.info;
    assert.equal((await new Validator().validate(broken)).valid, false);
    const operations = Object.values(doc.paths).flatMap((p) => Object.keys(p));
    console.log(`OpenAPI ${doc.openapi}: ${Object.keys(doc.paths).length} paths, ${operations.length} operations, ${Object.keys(doc.components?.schemas ?? {}).length} schemas`);
  });

  it('the browsable page renders the document', async () => {
    const { context, page } = await newPage(stack);
    await page.goto(`${stack.appUrl}/api/docs/`);
    await page.locator('.opblock').first().waitFor();
    assert.ok((await page.locator('.opblock').count()) > 10, 'the operations are listed');
    await screenshot(page, 'api-docs');
    await context.close();
  });
});
