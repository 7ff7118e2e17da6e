/**
 * `docker rename`: the new name is checked and taken, and legacy links that name the container,
 * as parent or as child, follow it.
 */
import { conflict, invalidArgument } from '../../lib/errors.js';
import type { EventBus } from '../events.js';
import { validateName } from './container-create.js';
import { renamedLinks } from './container-links.js';
import { eventAttrs, type ContainerRecord } from './container-model.js';
import type { ContainerTable } from './container-table.js';

export function renameContainer(table: ContainerTable, events: EventBus, c: ContainerRecord, newName: string): void {
  if (!newName) throw invalidArgument('Neither old nor new names may be empty');
  const name = validateName(newName);
  if (name === c.name) throw conflict(`Renaming a container with the same name as its current name`);
  table.checkNameFree(name);
  const old = table.rename(c, name);
  for (const other of table.all()) {
    const links = renamedLinks(other.hostConfig, old, name);
    if (!links) continue;
    other.hostConfig = { ...other.hostConfig, Links: links };
    table.save(other);
  }
  events.publish('container', 'rename', c.id, eventAttrs(c, { oldName: `/${old}` }));
}
