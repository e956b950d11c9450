/** DOM helpers shared by the inspector's modules: lookups by id and element builders. */
import { relativeTime } from './format.ts';

export const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

type Child = Node | string | null;

/** Appends nodes and text (Node.appendChild: the Workers types redefine Element.append). */
export function add(parent: Node, ...children: Child[]): void {
  for (const child of children)
    if (child !== null) parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
}

/** Inserts nodes before `parent`'s first child, in their order. */
export function prepend(parent: Node, ...children: Node[]): void {
  const first = parent.firstChild;
  for (const child of children) parent.insertBefore(child, first);
}

/** An HTML element with its attributes (`class` sets the class name) and children. */
export function el(tag: string, attributes: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'class') node.className = value;
    else node.setAttribute(name, value);
  }
  add(node, ...children);
  return node;
}

/** An SVG element with its attributes and children. */
export function svg(tag: string, attributes: Record<string, string | number> = {}, ...children: Child[]): SVGElement {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  add(node, ...children);
  return node;
}

/** A time as "3 min ago", the absolute local time in its title. */
export function timeAgo(iso: string): HTMLElement {
  const date = new Date(iso);
  return el('time', { datetime: iso, title: date.toLocaleString() }, relativeTime(date, new Date()));
}
