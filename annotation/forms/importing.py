"""The researcher's upload form for a study import."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from annotation.importformat import FORMATS
from annotation.models import Answer


class StudyImportForm(forms.Form):
    file = forms.FileField(
        help_text="JSONL (.jsonl, .ndjson) or CSV (.csv), UTF-8; see the import format guide."
    )
    dry_run = forms.BooleanField(
        required=False, label="Dry run: check the file and report, write nothing"
    )
    add_systems = forms.BooleanField(required=False, label="Create systems named in the file")

    def clean_file(self) -> UploadedFile:
        upload: UploadedFile = self.cleaned_data["file"]
        name = upload.name or ""
        if not any(name.lower().endswith(suffix) for suffix in FORMATS):
            raise forms.ValidationError(
                "Unsupported file type; upload a .jsonl, .ndjson or .csv file."
            )
        limit = settings.CONCORD_MAX_IMPORT_BYTES
        if upload.size is not None and upload.size > limit:
            raise forms.ValidationError(f"The file is larger than {limit // (1 << 20)} MiB.")
        return upload


class LeakRemedyForm(forms.Form):
    """A researcher's remedy for one flagged answer; the edited turns come as repeated `turn`."""

    remedy = forms.ChoiceField(choices=Answer.LeakRemedy.choices)
    note = forms.CharField(required=False, max_length=2000, widget=forms.Textarea)
