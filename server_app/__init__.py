"""server_app"""
