/**
 * Which webhook URLs are taken (docs/SECURITY.md, "Webhooks"): https, or http only with
 * WEBHOOK_ALLOW_PRIVATE; never on a port fetch refuses; and no private or loopback address unless
 * WEBHOOK_ALLOW_PRIVATE is set, so a client that may set a session's `webhook_url` cannot make the service POST into
 * its own network. A literal IP is checked against the private ranges; a host name here only by
 * its name (`localhost`, `*.localhost`, `*.internal`, `*.local`, `*.home.arpa`, a name of one
 * label). Node and Deno check the addresses a name resolves to as they connect
 * (functions/webhook-fetch.ts, `isPrivateAddress`); Workers cannot resolve names, so a Workers
 * deployment whose network reaches private services by public names must filter egress itself.
 */

/** The ports fetch refuses to connect to (the Fetch standard's "bad port"): every delivery to one would fail. */
const BAD_PORTS = new Set(
  (
    '1 7 9 11 13 15 17 19 20 21 22 23 25 37 42 43 53 69 77 79 87 95 101 102 103 104 109 110 111 113 115 117 119 ' +
    '123 135 137 139 143 161 179 389 427 465 512 513 514 515 526 530 531 532 540 548 554 556 563 587 601 636 ' +
    '989 990 993 995 1719 1720 1723 2049 3659 4045 4190 5060 5061 6000 6566 6665 6666 6667 6668 6669 6679 6697 10080'
  )
    .split(' ')
    .map(Number),
);

/** Why `text` is refused as a webhook URL, or null when it is taken. */
export function webhookUrlProblem(text: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:'))
    return allowPrivate ? 'must be an http or https URL' : 'must be an https URL (http needs WEBHOOK_ALLOW_PRIVATE)';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (BAD_PORTS.has(Number(url.port)))
    return `uses port ${url.port}, which fetch refuses to connect to (a "bad port" of the Fetch standard)`;
  if (!allowPrivate && isPrivateHost(url.hostname))
    return `points at a private or loopback address (${url.hostname}); set WEBHOOK_ALLOW_PRIVATE to allow it`;
  return null;
}

/** A loopback, private, link-local or unspecified address, or a name that is one by definition. */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.+$/, '');
  if (host.startsWith('[')) return isPrivateIPv6(host.slice(1, -1));
  const v4 = ipv4(host);
  if (v4) return isPrivateIPv4(v4);
  // A name of one label is no public receiver's: a resolver finds it under its own search domains.
  return !host.includes('.') || /(^|\.)(localhost|internal|local|home\.arpa)$/.test(host);
}

/**
 * Whether a resolver's answer (dotted IPv4, or IPv6 with perhaps a zone or an IPv4 tail) is an
 * address `isPrivateHost` refuses; a text that is no address counts as one.
 */
export function isPrivateAddress(address: string): boolean {
  const v6 = address.includes(':');
  const host = v6 ? `[${address.replace(/%.*$/, '')}]` : address;
  if (!URL.canParse(`http://${host}/`)) return true;
  const { hostname } = new URL(`http://${host}/`);
  return isPrivateHost(hostname) || (v6 ? !hostname.startsWith('[') : ipv4(hostname) === null);
}

/** The four octets of dotted-quad text (the WHATWG URL parser has normalized other forms to it). */
function ipv4(host: string): number[] | null {
  const parts = host.split('.');
  if (parts.length !== 4 || !parts.every((part) => /^\d{1,3}$/.test(part))) return null;
  const octets = parts.map(Number);
  return octets.every((octet) => octet <= 255) ? octets : null;
}

function isPrivateIPv4([a = 0, b = 0, c = 0]: number[]): boolean {
  return (
    a === 0 || // this network
    a === 10 || // RFC 1918
    a === 127 || // loopback
    (a === 100 && b >= 64 && b <= 127) || // shared address space (RFC 6598)
    (a === 169 && b === 254) || // link-local
    (a === 172 && b >= 16 && b <= 31) || // RFC 1918
    (a === 192 && b === 168) || // RFC 1918
    (a === 192 && b === 0 && c === 0) || // protocol assignments (RFC 6890)
    (a === 198 && (b === 18 || b === 19)) || // benchmarking (RFC 2544), routed inside networks
    a >= 224 // multicast and reserved
  );
}

function isPrivateIPv6(address: string): boolean {
  if (address === '::' || address === '::1') return true;
  // An IPv4 address inside: mapped (::ffff:a.b.c.d, which the URL parser writes as
  // ::ffff:xxxx:xxxx), translated (::ffff:0:a.b.c.d, RFC 2765), IPv4-compatible (::a.b.c.d), or
  // NAT64's well-known prefix (64:ff9b::/96).
  const mapped = /^(?:::ffff:|::ffff:0:|::|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(address);
  if (mapped) {
    const high = Number.parseInt(mapped[1]!, 16);
    const low = Number.parseInt(mapped[2]!, 16);
    return isPrivateIPv4([high >> 8, high & 255, low >> 8, low & 255]);
  }
  // NAT64's local-use prefix (64:ff9b:1::/48, RFC 8215): whatever it translates to.
  if (address.startsWith('64:ff9b:1:')) return true;
  const groups = address.split(':');
  // 6to4 (2002::/16, RFC 3056): the IPv4 address in the next two groups, which a relay reaches.
  if (groups[0] === '2002') {
    const high = Number.parseInt(groups[1] || '0', 16);
    const low = Number.parseInt(groups[2] || '0', 16);
    return isPrivateIPv4([high >> 8, high & 255, low >> 8, low & 255]);
  }
  // Teredo (2001:0::/32, RFC 4380): the server's IPv4 address in bits 32-63, the client's in the
  // last 32 bits with each bit inverted; a relay reaches the client through that server.
  if (groups[0] === '2001') {
    const words = hextets(address);
    if (words[1] === 0) {
      const server = [words[2]! >> 8, words[2]! & 255, words[3]! >> 8, words[3]! & 255];
      const high = words[6]! ^ 0xffff;
      const low = words[7]! ^ 0xffff;
      return isPrivateIPv4(server) || isPrivateIPv4([high >> 8, high & 255, low >> 8, low & 255]);
    }
  }
  const first = Number.parseInt(groups[0] || '0', 16);
  // fc00::/7 (unique local), fe80::/10 (link-local), fec0::/10 (site-local, deprecated but
  // still routed inside some networks), ff00::/8 (multicast).
  return (
    (first & 0xfe00) === 0xfc00 ||
    (first & 0xffc0) === 0xfe80 ||
    (first & 0xffc0) === 0xfec0 ||
    (first & 0xff00) === 0xff00
  );
}

/** The eight 16-bit groups of an IPv6 address as the URL parser writes it (hex, `::` for a run of zeros). */
function hextets(address: string): number[] {
  const [head = '', tail] = address.split('::');
  const words = (text: string) => (text === '' ? [] : text.split(':').map((group) => Number.parseInt(group, 16)));
  const front = words(head);
  const back = tail === undefined ? [] : words(tail);
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
}
