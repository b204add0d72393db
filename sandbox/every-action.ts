/**
 * One payload for every member of Action's `action` oneof, each with every field of its
 * message set to a non-zero value (test/unit/workflow-sim.test.ts checks the set is complete
 * against the loaded contract). The simulator's `every_action` step sends them in
 * field-number order, so a test sees each kind reach longrun and what longrun answered.
 */
import type { ActionKind } from '../src/workflow/contract';

export const everyActionPayload: Readonly<Record<ActionKind, Readonly<Record<string, unknown>>>> = {
  runCommand: { program: 'ls', arguments: ['-l', 'a b'], flags: ['--all'], timeout: '30' },
  runHTTPRequest: { method: 'POST', path: '/api/v4/echo?every_action=1', body: '{"title":"every action"}' },
  runReadFile: { filepath: 'src/main.ts', limit: '100', offset: '10' },
  runWriteFile: { filepath: 'notes.txt', contents: 'hello\n' },
  runGitCommand: { command: 'log', arguments: '--oneline -1', repository_url: 'https://gitlab.example.com/group/project.git' },
  runEditFile: { filepath: 'src/a.ts', oldString: 'let a = 1;', newString: 'const a = 1;' },
  newCheckpoint: {
    status: 'RUNNING',
    checkpoint: '{"channel_values":{"step":1}}',
    goal: 'every action',
    errors: ['tool failed once'],
    agent_context_usage: { executor: { total_tokens: 5400, max_tokens: 200_000 }, planner: { total_tokens: 1200, max_tokens: 200_000 } },
  },
  listDirectory: { directory: 'src' },
  grep: { search_directory: 'src', pattern: 'TODO', case_insensitive: true },
  findFiles: { name_pattern: '*.ts' },
  runMCPTool: { name: 'search', args: '{"q":"every action"}' },
  mkdir: { directory_path: 'build/out' },
  runReadFiles: { filepaths: ['a.ts', 'b.ts'] },
  runShellCommand: { command: 'make test', timeout: '120' },
  trackLlmCallForSelfHosted: { workflowID: 'every-action', featureQualifiedName: 'duo_chat', featureAiCatalogItem: true },
  scheduleNotification: { task_id: 'task-1', condition: 'pipeline finished', message: 'Pipeline is done' },
};
