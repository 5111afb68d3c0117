// The console in a real browser: Debian's chromium, driven by playwright-core, against a real
// cluster (`specie cluster up --authorities --offline --exchange --ledger-of-record`) that
// crates/specie/tests/specie/console.rs starts, with this environment:
//   CONSOLE_URL, SPECIE (the binary), CLUSTER_DIR, CHROMIUM, WORK (a scratch directory),
//   SENTINEL, EXCHANGE (its replicas' URLs), USD_ISSUER (the cluster's issuer wallet), EUR_NODE and EUR_ISSUER (the exchange's other
//   currency's node and issuer wallet), SCREENSHOTS (optional: where to save each view).
// Exits non-zero on the first check that fails, saying which.

import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import assert from 'node:assert/strict';

const env = process.env;
const base = env.CONSOLE_URL;

function specie(...args) {
  return execFileSync(env.SPECIE, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function step(name) {
  console.log(`- ${name}`);
}

async function eventually(what, check, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const result = await check();
    if (result) return result;
    if (Date.now() > deadline) throw new Error(`not within ${seconds} s: ${what}`);
    await new Promise((done) => setTimeout(done, 300));
  }
}

const browser = await chromium.launch({ executablePath: env.CHROMIUM, args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1150, height: 850 } });
const page = await context.newPage();
// A page breaking the Content Security Policy, or failing to load something, says so here.
const problems = [];
page.on('console', (message) => {
  if (message.type() === 'error') problems.push(message.text());
});

async function shot(name) {
  if (env.SCREENSHOTS) await page.screenshot({ path: `${env.SCREENSHOTS}/console-${name}.png`, fullPage: true });
}

async function view(path, heading) {
  const response = await page.goto(base + path);
  assert.equal(response.status(), 200, `${path} answers 200`);
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  return response;
}

// The wallet's action `action` on wallet `name`, through its form, as a person would: fill each
// field by its label, press the button. Returns what the wallet printed; throws if it failed.
async function act(name, action, fields = {}, { mayFail = false } = {}) {
  await page.goto(`${base}/wallets/${name}`);
  const form = page.locator(`form:has(input[name="action"][value="${action}"])`);
  for (const [label, value] of Object.entries(fields)) {
    await form.getByLabel(label, { exact: true }).fill(String(value));
  }
  await form.getByRole('button').click();
  await page.locator('.outcome, .notice.error').first().waitFor();
  const printed = (await page.locator('.outcome pre').count()) ? await page.locator('.outcome pre').innerText() : '';
  const ok = (await page.locator('.outcome .notice.ok').count()) > 0;
  if (!ok && !mayFail) {
    const notices = await page.locator('.notice').allInnerTexts();
    throw new Error(`${action} on ${name} failed: ${notices.join(' / ')}\n${printed}`);
  }
  return printed;
}

async function balances(name) {
  await page.goto(`${base}/wallets/${name}`);
  const sections = {};
  for (const section of await page.locator('.modes section').all()) {
    sections[await section.getByRole('heading').innerText()] = await section.locator('pre').innerText();
  }
  return sections;
}

const paymentString = (text, prefix) => {
  const found = text.match(new RegExp(`${prefix}[0-9a-z]+`));
  assert.ok(found, `a ${prefix}… string in:\n${text}`);
  return found[0];
};

try {
  step('every operator view answers with live data, before any login');
  await view('/', 'Groups and replicas');
  const leaders = await page.locator('tbody tr', { hasText: 'leader' }).count();
  assert.ok(leaders >= 10, `a leader in every group (${leaders} rows say leader)`);
  await page.getByText('ready', { exact: true }).first().waitFor();
  await view('/supply', 'Supply');
  await page.getByText("The audit's verdict: balanced").waitFor();
  await view('/committee', 'Byzantine committee');
  await page.getByText('4 authorities: up to 1 of them may lie').waitFor();
  await view('/offline', 'Offline authority');
  await page.getByRole('table', { name: 'Issuing keys' }).waitFor();
  await view('/exchange', 'Exchange');
  await page.getByText('State hash at height').waitFor();
  await view('/ledger', 'Ledger of record');
  await view('/charts', 'Throughput and latency');
  assert.equal(await page.locator('figure.chart').count(), 3);

  step('keyboard: the first Tab reaches the skip link, which moves focus to the content');
  await view('/', 'Groups and replicas');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Skip to the content');
  await page.keyboard.press('Enter');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'main');

  step('the wallets need the login; a forged or cross-site post is refused');
  assert.equal((await page.goto(`${base}/wallets`)).status(), 401);
  let refused = await page.request.post(`${base}/wallets`, { form: { name: 'mallory', csrf: 'forged' } });
  assert.equal(refused.status(), 401, "a stranger's post to the wallets, turned away before its body is read");
  refused = await page.request.post(`${base}/logout`, { form: { csrf: 'forged' } });
  assert.equal(refused.status(), 403, 'a post without its session token');
  await page.goto(`${base}/login`);
  await page.getByLabel('Operator token').fill('not the token');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByText("That is not the operator's token").waitFor();
  const token = readFileSync(`${env.CLUSTER_DIR}/pki/console.token`, 'utf8').trim();
  await page.goto(`${base}/login`);
  await page.getByLabel('Operator token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByText('Logged in as the operator.').waitFor();
  await page.goto(`${base}/wallets`);
  const csrf = await page.locator('input[name="csrf"]').first().inputValue();
  refused = await page.request.post(`${base}/wallets`, { form: { name: 'mallory', csrf: csrf.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')) } });
  assert.equal(refused.status(), 403, 'a tampered session token');
  refused = await page.request.post(`${base}/wallets`, { form: { name: 'mallory', csrf }, headers: { Origin: 'http://evil.example' } });
  assert.equal(refused.status(), 403, 'a post from another origin');
  refused = await page.request.post(`${base}/wallets/nobody`, { form: { action: 'address', csrf } });
  assert.equal(refused.status(), 404, 'an action on a wallet that is not there');
  await page.goto(`${base}/wallets`);
  assert.ok(!(await page.getByRole('link', { name: 'mallory' }).count()), 'no refused post made a wallet');
  assert.equal((await page.goto(`${base}/wallets`)).status(), 200, 'a refused post did not log the operator out');
  const rebound = await new Promise((done, fail) => {
    const { hostname, port } = new URL(base);
    const headers = { Host: `rebound.example:${port}` };
    http.get({ host: hostname, port, path: '/', headers }, (answer) => done(answer.statusCode)).on('error', fail);
  });
  assert.equal(rebound, 421, 'a request naming another host (DNS rebinding) gets nothing');

  step('two wallets in the browser; the issuer mints to one, which receives it');
  for (const name of ['alice', 'bob']) {
    await page.goto(`${base}/wallets`);
    await page.getByLabel(/^Name/).fill(name);
    await page.getByRole('button', { name: 'Create' }).click();
    await page.locator('.outcome .notice.ok').waitFor();
  }
  await shot('wallets');
  const injected = await page.request.post(`${base}/wallets/alice`, { form: { action: 'send', to: '--node=http://evil', amount: '1', csrf } });
  assert.match(await injected.text(), /an address, like usd1q/, 'a value shaped like an option is refused');
  const addressOf = async (name, amount = '') => {
    await act(name, 'address', { 'Amount to ask for (optional)': amount });
    await page.getByRole('img', { name: /A QR code of the payment request specie:/ }).waitFor();
    return (await page.locator('#address').innerText()).trim();
  };
  const alice = await addressOf('alice', 2000);
  assert.equal(await page.locator('#request').innerText(), `specie:${alice}?amount=2000`);
  await shot('receive');
  const minted = specie('wallet', `--wallet=${env.USD_ISSUER}`, `--node=${env.SENTINEL}`, 'mint', '2000', `--to=${alice}`);
  await act('alice', 'import', { 'Payment string from the payer (specie-pay1…)': paymentString(minted, 'specie-pay1') });
  assert.match((await balances('alice'))['Core and private levels'], /^spendable:\s+2000 usd/m);

  step('a core payment from the browser reaches the other wallet and the ledger view');
  const bob = await addressOf('bob');
  const sent = await act('alice', 'send', { "Payee's address": bob, Amount: 250 });
  const txid = sent.match(/txid ([0-9a-f]{64})/)[1];
  await act('bob', 'import', { 'Payment string from the payer (specie-pay1…)': paymentString(sent, 'specie-pay1') });
  assert.match((await balances('bob'))['Core and private levels'], /^spendable:\s+250 usd/m);
  await eventually('the payment in a block of the ledger', async () => {
    await page.goto(`${base}/ledger?txid=${txid}`);
    return (await page.getByText(/In block \d+ at position \d+/).count()) > 0;
  });
  await page.getByRole('heading', { name: `Transaction ${txid}` }).waitFor();
  await shot('ledger');

  step('confidential: shield, pay confidentially, the payee receives');
  await act('alice', 'shield', { Amount: 300 });
  const hidden = await act('alice', 'send-confidential', { "Payee's address": await addressOf('bob'), Amount: 120 });
  await act('bob', 'receive', { 'Private payment string (specie-cpay1…, specie-apay1…, specie-upay1…)': paymentString(hidden, 'specie-cpay1') });
  assert.match((await balances('bob'))['Core and private levels'], /^confidential spendable:\s+120 usd/m);

  step('anonymous: both enrol at the registration authority from the browser; an anonymous payment is received');
  for (const [name, id] of [['alice', 7], ['bob', 8]]) {
    const challenge = specie('ra', '--dir', env.RA_DIR, 'challenge', '--id', String(id)).trim();
    const answered = await act(name, 'enrol', { "The registration authority's challenge (specie-enrol-challenge1…)": challenge });
    const credential = specie('ra', '--dir', env.RA_DIR, 'enrol', paymentString(answered, 'specie-enrol-request1')).trim();
    await act(name, 'enrol-credential', { "The registration authority's credential (specie-credential1…)": credential });
  }
  await act('alice', 'anonymise', { Amount: 300 });
  const anonymous = await act('alice', 'send-anonymous', { "Payee's enrolment id": 8, Amount: 120 });
  await act('bob', 'receive', { 'Private payment string (specie-cpay1…, specie-apay1…, specie-upay1…)': paymentString(anonymous, 'specie-apay1') });
  assert.match((await balances('bob'))['Core and private levels'], /^anonymous spendable:\s+120 usd/m);

  step('FastPay: fund an account, pay another account, the payee sees it');
  await act('alice', 'fastpay-account');
  const bobAccount = (await act('bob', 'fastpay-account')).match(/[0-9a-f]{64}/)[0];
  await act('alice', 'fastpay-fund', { Amount: 200 });
  await act('alice', 'fastpay-pay', { "Payee's account (64 hex digits)": bobAccount, Amount: 70 });
  await eventually("bob's FastPay balance", async () => /\b70 usd/.test((await balances('bob'))['Byzantine mode (FastPay)']));

  step('offline: a device funded from core coins holds its tokens and pays another device');
  for (const name of ['alice', 'bob']) {
    await act(name, 'offline-create');
    await act(name, 'offline-enrol');
  }
  await act('alice', 'offline-fund', { Amount: 150 });
  assert.match((await balances('alice'))['Offline device'], /balance 150; 2 tokens/);
  const request = paymentString(await act('bob', 'offline-request', { Amount: 50 }), 'specie-offline-request1:');
  const offlinePayment = await act('alice', 'offline-pay', { 'Payment request from the payee (specie-offline-request1:…)': request });
  await act('bob', 'offline-receive', { 'Offline payment from the payer (specie-offline-pay1:…)': paymentString(offlinePayment, 'specie-offline-pay1:') });
  assert.match((await balances('bob'))['Offline device'], /balance 50; 1 tokens/);
  await view('/offline', 'Offline authority');
  await page.getByText(/Funded 150/).waitFor();
  await shot('offline');

  step('exchange: an offer placed in the browser trades; another is cancelled');
  const trader = `${env.WORK}/trader-eur.json`;
  // No --hrp: a new wallet takes its node's currency (eur).
  assert.match(specie('wallet', `--wallet=${trader}`, `--node=${env.EUR_NODE}`, 'create'), /for currency "eur"/);
  const eurAddress = specie('wallet', `--wallet=${trader}`, 'address').trim();
  const eurMint = specie('wallet', `--wallet=${env.EUR_ISSUER}`, 'mint', '1000', `--to=${eurAddress}`);
  specie('wallet', `--wallet=${trader}`, 'import', paymentString(eurMint, 'specie-pay1'));
  specie('exchange', 'deposit', `--wallet=${trader}`, `--exchange=${env.EXCHANGE}`, '--asset=eur', '--amount=500');
  specie('exchange', 'offer', `--wallet=${trader}`, `--exchange=${env.EXCHANGE}`, '--sell=eur', '--buy=usd', '--amount=300', '--min-price=0.5');
  await act('alice', 'exchange-deposit', { 'Asset (e.g. usd)': 'usd', Amount: 200 });
  const offer = { 'Sell asset': 'usd', 'Buy asset': 'eur', 'Amount to sell': 150, 'Minimum price (e.g. 0.95)': '0.5' };
  await act('alice', 'exchange-offer', offer);
  await eventually("alice's offer traded for eur", async () => /eur: [1-9]/.test((await balances('alice'))['Exchange']));
  await view('/exchange', 'Exchange');
  await shot('exchange');
  const resting = await act('alice', 'exchange-offer', { ...offer, 'Amount to sell': 10, 'Minimum price (e.g. 0.95)': '1000' });
  const offerId = resting.match(/offer (\d+)/)[1];
  assert.match((await balances('alice'))['Exchange'], new RegExp(`offer ${offerId}:`));
  await act('alice', 'exchange-cancel', { 'Offer id': offerId });
  assert.doesNotMatch((await balances('alice'))['Exchange'], new RegExp(`offer ${offerId}:`));
  await balances('alice');
  await shot('wallet');

  step("the auditor's flags, the supply and the charts show what happened");
  await view('/auditors', "Auditors' flags");
  await page.getByRole('table', { name: 'Flagged transactions' }).locator('tbody a[href^="/ledger?txid="]').first().waitFor();
  await shot('auditors');
  await view('/supply', 'Supply');
  await page.getByText("The audit's verdict: balanced").waitFor();
  await shot('supply');
  await eventually('the charts saw the payments', async () => {
    await page.goto(`${base}/charts`);
    return /peak [1-9]/.test(await page.locator('#confirmed-summary').innerText());
  });
  await shot('charts');
  await view('/committee', 'Byzantine committee');
  await shot('committee');

  step('the operator sees a leader change after a kill');
  // Each replica row of group shard-0 as its cells: group, replica, role, …, health.
  const shardRows = async () => {
    await view('/', 'Groups and replicas');
    const rows = await page.getByRole('table', { name: 'Every replica of every group' }).locator('tbody tr').allInnerTexts();
    return rows.map((row) => row.split('\t').map((cell) => cell.trim())).filter((cells) => cells[0] === 'shard-0');
  };
  const killed = (await shardRows()).find((cells) => cells[2] === 'leader')[1];
  const pid = readFileSync(`${env.CLUSTER_DIR}/pids/shard-0-${killed}.pid`, 'utf8').trim();
  process.kill(Number(pid), 'SIGKILL');
  await eventually('another shard-0 replica leads and the killed one shows DOWN', async () => {
    const rows = await shardRows();
    const leader = rows.find((cells) => cells[2] === 'leader');
    const down = rows.find((cells) => cells[1] === killed);
    return leader && leader[1] !== killed && down && down[8].startsWith('DOWN');
  });
  await shot('groups');

  step('the operator starts the killed member again from the browser; it rejoins as a follower');
  await page.getByRole('button', { name: 'Start the members that are not running' }).click();
  await page.getByText('Every member of this host runs again.').waitFor({ timeout: 90000 });
  await eventually('the restarted replica follows', async () => {
    const back = (await shardRows()).find((cells) => cells[1] === killed);
    return back && back[2] === 'follower' && back[8] === 'ok';
  });

  assert.deepEqual(problems.filter((p) => !/status of 40[13]/.test(p)), [], 'no page broke its policy or failed to load');
  console.log('every check passed');
} catch (error) {
  // What the browser showed when a check failed.
  console.log(`at ${page.url()}:\n${await page.locator('body').innerText().catch(() => '?')}`);
  throw error;
} finally {
  await browser.close();
}
