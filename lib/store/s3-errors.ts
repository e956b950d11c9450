import { StorageError } from '../errors.ts';

/** How the S3 adapter (./s3.ts) reads the SDK's errors, and the StorageError it throws for one. */

export function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

export function nameOf(error: unknown): string | undefined {
  return error instanceof Error ? error.name : undefined;
}

/**
 * The key is absent. A missing bucket (NoSuchBucket) is a misconfiguration, not absence; a HEAD's
 * bodiless 404 (NotFound) says neither, which S3Store's `#checkBucket` settles.
 */
export function isNotFound(error: unknown): boolean {
  const name = nameOf(error);
  if (name === 'NoSuchKey' || name === 'NotFound') return true;
  return statusOf(error) === 404 && name !== 'NoSuchBucket';
}

export function storageError(operation: string, key: string, error: unknown): StorageError {
  const message = error instanceof Error ? error.message : String(error);
  return new StorageError(`S3 ${operation} ${key} failed: ${message}`, {
    operation,
    key,
    status: statusOf(error),
    name: nameOf(error),
  });
}
