// Every kind of question an agent asks (`ui_request`: select, confirm,
// input, editor, notify), in Chromium against the real daemon: each renders
// and is answered from a desktop tab's dialog, its inbox, or a phone's,
// and the other tabs' copies close. The demo model asks them (`ask-select:`
// and the rest, docs/AGENT.md).
import { test, expect, createAgent, enrolled, openAgent, project, prompt } from './daemon';

type Page = import('@playwright/test').Page;

const PHONE = { viewport: { width: 390, height: 844 }, touch: true };

/** Waits out the arming delay of a new question (crate::guard). */
const armed = (page: Page) => page.waitForTimeout(900);

test('select, confirm, input, editor and notify each render and are answered from a dialog, an inbox or a phone', async ({ browser, daemon }, testInfo) => {
  const [context, desk] = await enrolled(browser, daemon);
  await createAgent(desk, project(), 'inquirer');
  const [phoneSide, phone] = await enrolled(browser, daemon, PHONE);
  await openAgent(phone, 'inquirer');
  const reply = desk.locator('.message.assistant').last();

  // A choice, tapped on the phone's dialog; the desk's closes.
  await prompt(desk, 'ask-select: Which colour? | red | green | blue');
  const deskDialog = desk.getByRole('dialog');
  const phoneDialog = phone.getByRole('dialog');
  await expect(phoneDialog).toContainText('Which colour?');
  await expect(phoneDialog.getByRole('button', { name: 'green' })).toBeInViewport();
  await expect(deskDialog.getByRole('button', { name: 'blue' })).toBeVisible();
  await phone.screenshot({ path: testInfo.outputPath('phone-select.png') });
  await armed(phone);
  await phoneDialog.getByRole('button', { name: 'green' }).tap();
  await expect(deskDialog).toBeHidden();
  await expect(phoneDialog).toBeHidden();
  await expect(reply).toContainText('You answered: green');

  // Yes or no, from the desk's dialog.
  await prompt(desk, 'ask-confirm: Ship it?');
  await expect(deskDialog).toContainText('Ship it?');
  await expect(phoneDialog.getByRole('button', { name: 'No' })).toBeInViewport();
  await armed(desk);
  await deskDialog.getByRole('button', { name: 'Yes' }).click();
  await expect(phoneDialog).toBeHidden();
  await expect(reply).toContainText('You answered: yes');

  // A longer text, prefilled, edited on the phone.
  await prompt(desk, 'ask-editor: Edit the note\nline one\nline two');
  const editor = phoneDialog.getByLabel('Answer');
  await expect(editor).toHaveValue('line one\nline two');
  await armed(phone);
  await editor.fill('line one\nline 2, edited');
  await phone.screenshot({ path: testInfo.outputPath('phone-editor.png') });
  await phoneDialog.getByRole('button', { name: 'Submit' }).tap();
  await expect(deskDialog).toBeHidden();
  await expect(reply).toContainText('line 2, edited');

  // Free text, from the phone's inbox pane (the agent left for it).
  await prompt(desk, 'ask: Your name?');
  await expect(deskDialog).toContainText('Your name?');
  // The phone's dialog is modal: "Later" leaves the question in the inbox.
  await phoneDialog.getByRole('button', { name: /Later/ }).tap();
  await phone.getByRole('navigation', { name: 'Panes' }).getByRole('button', { name: /waiting/ }).tap();
  const entry = phone.locator('.inbox-item', { hasText: 'Your name?' });
  await expect(entry).toBeInViewport();
  await armed(phone);
  await entry.getByLabel('Answer').fill('Ada');
  await entry.getByRole('button', { name: 'Submit' }).tap();
  await expect(deskDialog).toBeHidden();
  await expect(reply).toContainText('You answered: Ada');

  // A choice from the desk's inbox, the phone on its list.
  await phone.getByRole('navigation', { name: 'Panes' }).getByRole('button', { name: 'Agents' }).tap();
  await prompt(desk, 'ask-select: Which size? | small | large');
  await expect(deskDialog).toContainText('Which size?');
  await deskDialog.getByRole('button', { name: /Later/ }).click();
  const deskEntry = desk.locator('.inbox-item', { hasText: 'Which size?' });
  await armed(desk);
  await deskEntry.getByRole('button', { name: 'large' }).click();
  await expect(deskEntry).toHaveCount(0);
  await expect(reply).toContainText('You answered: large');

  // Something said, not asked: shown, and nothing waits on it.
  await openAgent(phone, 'inquirer');
  await prompt(desk, 'ask-notify: The build finished.');
  await expect(desk.locator('.agent-view .status')).toHaveText('idle');
  await expect(desk.locator('.inbox-item', { hasText: 'inquirer' })).toHaveCount(0);
  await expect(desk.locator('.transcript')).toContainText('The build finished.');
  await expect(phone.locator('.transcript')).toContainText('The build finished.');

  // Yes or no, tapped on the phone; the desk's dialog closes.
  await prompt(desk, 'ask-confirm: Deploy now?');
  await expect(phoneDialog).toContainText('Deploy now?');
  await expect(deskDialog).toContainText('Deploy now?');
  await armed(phone);
  await phoneDialog.getByRole('button', { name: 'No' }).tap();
  await expect(deskDialog).toBeHidden();
  await expect(phoneDialog).toBeHidden();
  await expect(reply).toContainText('You answered: no');

  // A longer text, from the desk's inbox; the phone's dialog closes.
  await prompt(desk, 'ask-editor: Edit the title\nold title');
  await expect(deskDialog).toContainText('Edit the title');
  await expect(phoneDialog).toContainText('Edit the title');
  await deskDialog.getByRole('button', { name: /Later/ }).click();
  const editorEntry = desk.locator('.inbox-item', { hasText: 'Edit the title' });
  await expect(editorEntry.getByLabel('Answer')).toHaveValue('old title');
  await armed(desk);
  await editorEntry.getByLabel('Answer').fill('new title');
  await editorEntry.getByRole('button', { name: 'Submit' }).click();
  await expect(editorEntry).toHaveCount(0);
  await expect(phoneDialog).toBeHidden();
  await expect(reply).toContainText('new title');
  await Promise.all([context.close(), phoneSide.close()]);
});
