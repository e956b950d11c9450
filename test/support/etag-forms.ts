import type { S3Store } from '../../lib/store/s3.ts';

/** A form an S3-compatible service writes an MD5 etag in. */
export type EtagForm = 'quoted' | 'bare' | 'bare upper case' | 'weak';

/** `md5` (hex, lower case) in `form`. */
export function inForm(md5: string, form: EtagForm): string {
  if (form === 'quoted') return `"${md5}"`;
  if (form === 'weak') return `W/"${md5}"`;
  return form === 'bare' ? md5 : md5.toUpperCase();
}

/** The MD5 an etag of any form names (the gateway's etags are quoted lower-case hex). */
function md5Of(etag: string): string {
  return etag.replace(/^W\//, '').replaceAll('"', '').toLowerCase();
}

/**
 * Makes the service behind `store` (fauxqs behind the conditional gateway, whose etags are the
 * quoted MD5) one that writes its etags in `listed` form in a listing and in `answered` form in
 * the answers to puts, gets and heads, as some S3-compatible services do; and whose If-Match
 * compares only with the `answered` form: a put if-match on another form is refused (412).
 */
export function serviceEtagForms(store: S3Store, forms: { listed: EtagForm; answered: EtagForm }): S3Store {
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = String(context.commandName);
      const input = args.input as { IfMatch?: string };
      if (name === 'PutObjectCommand' && input.IfMatch !== undefined) {
        const md5 = md5Of(input.IfMatch);
        // Another form than the service's own matches nothing.
        input.IfMatch = input.IfMatch === inForm(md5, forms.answered) ? `"${md5}"` : '"not-the-etag"';
      }
      const result = await next(args);
      const output = result.output as {
        ETag?: string;
        Contents?: { ETag?: string }[];
      };
      if (name === 'ListObjectsV2Command')
        for (const object of output.Contents ?? [])
          if (object.ETag) object.ETag = inForm(md5Of(object.ETag), forms.listed);
      if (['PutObjectCommand', 'GetObjectCommand', 'HeadObjectCommand'].includes(name) && output.ETag)
        output.ETag = inForm(md5Of(output.ETag), forms.answered);
      return result;
    },
    { step: 'initialize' },
  );
  return store;
}
