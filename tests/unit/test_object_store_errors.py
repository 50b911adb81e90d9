"""A failed listing of an s3a:// root is named by its HTTP status or S3 error code, never by a
"403" that a request id or a timing in the error text happens to contain."""

from __future__ import annotations

from lakehouse.files import unreachable_reason

WHERE, ROOT = "http://127.0.0.1:15090", "s3a://lakehouse/p"
# As obstore words them (captured from the local server), the request id with a "403" in it.
NO_BUCKET = (
    "Generic S3 error: Error performing list request: Error performing GET "
    "http://127.0.0.1:15090/lakehouse?delimiter=%2F&list-type=2&prefix=p%2F in 62.403534ms - "
    "Server returned non-2xx status code: 404 Not Found: <Error><Code>NoSuchBucket</Code>"
    "<RequestId>6X19AXx1VyB6SGbZ403P3pYjKpUffL9t</RequestId></Error>"
)
REFUSED = (
    "Generic S3 error: Error performing list request: Error performing GET "
    "http://127.0.0.1:15090/lakehouse?delimiter=%2F&list-type=2&prefix=p%2F in 1.337545ms - "
    "Server returned non-2xx status code: 403 Forbidden: <Error><Code>InvalidAccessKeyId</Code>"
    "</Error>"
)


def test_a_missing_bucket_is_named_as_such_whatever_digits_its_request_id_holds():
    assert unreachable_reason(NO_BUCKET, WHERE, "lakehouse", ROOT) == (
        f"No bucket 'lakehouse' at {WHERE}: create it, or fix LAKEHOUSE_ROOT."
    )
    # Without the error code, the status alone says it.
    without_code = NO_BUCKET.replace("<Code>NoSuchBucket</Code>", "")
    assert unreachable_reason(without_code, WHERE, "lakehouse", ROOT).startswith("No bucket")


def test_refused_credentials_and_an_unreachable_server_are_told_apart():
    assert unreachable_reason(REFUSED, WHERE, "lakehouse", ROOT).startswith(
        f"{WHERE} refused the credentials for bucket 'lakehouse'"
    )
    down = "Generic S3 error: error sending request: Connection refused (os error 111)"
    assert unreachable_reason(down, WHERE, "lakehouse", ROOT) == (
        f"Cannot reach {WHERE} for {ROOT} ({down}): start the local server with `make s3-up`, "
        "or fix AWS_ENDPOINT_URL_S3."
    )


def test_an_unknown_key_id_at_the_local_server_is_refused_credentials_not_a_missing_bucket():
    # versitygw answers an unknown access key id 404 XAdminUserNotFound (S3: 403).
    unknown = REFUSED.replace("403 Forbidden", "404 Not Found").replace(
        "InvalidAccessKeyId", "XAdminUserNotFound"
    )
    assert unreachable_reason(unknown, WHERE, "lakehouse", ROOT).startswith(
        f"{WHERE} refused the credentials for bucket 'lakehouse'"
    )
