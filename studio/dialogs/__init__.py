"""The studio's dialogs (template gallery, module import); each one previewable alone."""
