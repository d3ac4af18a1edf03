"""The shop's tables (as ``makemigrations`` writes them; tuples, which Django accepts too)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = ()

    operations = (
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("email", models.EmailField(max_length=254)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name="Receipt",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sent_to", models.EmailField(max_length=254)),
                ("attempt", models.IntegerField()),
                ("order", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, to="echoshop.order")),
            ],
        ),
    )
