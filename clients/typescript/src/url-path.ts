/** Puts an ID or image name into a URL path: `/` and `:` stay readable, anything unsafe is escaped. */
export function pathPart(name: string): string {
  if (!name) throw new Error('empty name or ID');
  return encodeURIComponent(name).replace(/%2F/g, '/').replace(/%3A/g, ':').replace(/%40/g, '@');
}
