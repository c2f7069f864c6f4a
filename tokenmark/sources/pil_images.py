"""A full decode of an image with Pillow: the one module that imports it (optional).

The header check in :func:`tokenmark.workload.images.sniff` refuses files that are not
images at all; a full decode also refuses images that are cut short or corrupt inside,
which a server would reject mid-run. It costs a decode per image, so it runs only when
asked (``verify_images``).
"""

from __future__ import annotations

import io

from tokenmark.errors import DatasetError

__all__ = ["verify_decodes"]


def verify_decodes(data: bytes, where: str) -> None:
    """Raise a :class:`DatasetError` naming ``where`` unless Pillow decodes ``data``."""
    try:
        from PIL import Image
    except ImportError:
        raise DatasetError("verifying images needs Pillow: pip install 'tokenmark[images]' "
                           "(or drop the image verification option)") from None
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
    except Exception as e:  # Pillow raises many types for bad data
        raise DatasetError(f"{where}: the image does not decode ({type(e).__name__}: {e}); "
                           "replace the file with a complete image") from None
