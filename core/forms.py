"""Form plumbing that every app's views share."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError


def form_errors_to(form: forms.BaseForm, exc: ValidationError) -> None:
    """Put a service's ValidationError on the form's fields (or on the form as a whole)."""
    if hasattr(exc, "error_dict"):
        for field, problems in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, problems)
    else:
        form.add_error(None, exc.messages)
